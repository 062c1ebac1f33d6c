"""``python -m pulsar_gateway``: the ``pulsar-gateway`` command."""

import sys

from pulsar_gateway.server.main import main

sys.exit(main())
