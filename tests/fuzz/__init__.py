"""Structure-aware fuzzing of a live gateway (docs/reliability.md "Protocol fuzzing").

* :mod:`tests.fuzz.hostile`: hostile values for every protobuf field type, whole messages
  filled from PulsarApi.proto's descriptors, raw protobuf bytes no encoder would write, and
  byte mutations. Pure data, seeded.
* :mod:`tests.fuzz.binary_sessions`: whole binary-protocol client sessions (CONNECT, producers,
  SENDs with hostile metadata, consumers, FLOW, ACKs of ids the gateway delivered, seeks,
  lookups, any command of the proto, mutated frames, abrupt ends) on real sockets, reading
  and decoding everything the gateway answers.
* :mod:`tests.fuzz.websocket_sessions`: the same for the WebSocket API on a raw socket:
  hostile upgrade requests (paths, query parameters, headers) and hostile frames after the
  upgrade (JSON of the wrong shape, values out of range, text that is not UTF-8, fragments,
  control frames, reserved bits, unmasked frames, closes with bad codes).
* :mod:`tests.fuzz.campaign`: runs sessions of both kinds against one gateway up to a count
  of inputs while an official-client producer and consumer pair round-trips on the same
  gateway, and reports inputs, crashes, 5xx answers, pair messages lost and the gateway's
  memory before and after.

``python -m tests.fuzz`` is the long mode (a gateway process on its own redis-server, a
million inputs by default); ``tests/integration/fuzz/test_fuzz.py`` runs a bounded campaign in the
suite. Counting: one *input* is one thing written to the gateway on its own: a frame
(well-formed or mutated), a chunk of garbage, an upgrade request, a WebSocket frame.
"""
