"""Soak and abuse runs: ONE gateway process flooded by misbehaving clients while its own
resident memory is sampled (``VmRSS``, every 0.1 s: baseline before the floods, peak during,
growth) and while a normal official-client workload (a producer and a consumer, 200 msg/s)
runs beside them, its end-to-end latency and lost messages recorded.

* :mod:`tests.soak.gateway`: a fresh ``redis-server`` and one ``pulsar-gateway`` process
  (the code of this checkout, of an inherited ``PYTHONPATH`` or of ``--source DIR``);
* :mod:`tests.soak.floods`: what the hostile clients share (counts, sockets, the window);
* :mod:`tests.soak.binary`, :mod:`tests.soak.websocket`, :mod:`tests.soak.rest`,
  :mod:`tests.soak.storm`: the hostile clients, on raw sockets and hand-written frames;
* :mod:`tests.soak.measure`: the RSS sampler and the health / CONNECT probers;
* :mod:`tests.soak.workload`: the normal workload (official client, in threads);
* :mod:`tests.soak.run`: one scenario's measured run (``Setup`` in, ``Figures`` out);
* :mod:`tests.soak.scenarios`: the scenarios, async functions returning ``Figures``;
* :mod:`tests.soak.report`: the table.

``python -m tests.soak [--scenario NAME ...] [--duration S] [--gateway-arg ARG ...]
[--source DIR] [--json PATH]`` runs the scenarios and prints the table; a test awaits a
scenario itself, e.g. ``(await scenarios.binary_slow_consumer(duration=10)).rss.growth_mib``.
"""
