"""Chaos under load (docs/reliability.md "Chaos under load"): an official-client workload on a
fleet of three gateways and one Redis while processes are SIGKILLed and restarted.

* :mod:`tests.chaos.processes`: a ``redis-server`` with an AOF fsynced at every write, and
  gateway processes that restart on the same ports.
* :mod:`tests.chaos.workload`: named (dedup) producers and one consumer per gateway on
  Shared, Key_Shared, Failover and delayed-message subscriptions, recording every receipt,
  delivery and acknowledgement.
* :mod:`tests.chaos.verdict`: pure data: lost, dedup duplicates, acknowledged messages
  redelivered beyond the in-flight window, early delayed messages, order per key.
* :mod:`tests.chaos.run`: starts everything, kills at random, drains, judges.

``python -m tests.chaos`` is the long mode (five minutes of chaos by default);
``tests/integration/chaos/test_chaos.py`` runs a short one in the suite.
"""
