import time, pulsar
S = pulsar.ConsumerType.Shared
def test_probe(gateway, client_factory, redis_clean):
    c = client_factory(gateway.url)
    a = c.subscribe("probe-s", "sh", consumer_type=S)
    p = c.create_producer("probe-s", batching_enabled=False)
    for i in range(5):
        t = time.monotonic()
        p.send(b"x")
        a.receive(3000)
        print("latency", time.monotonic() - t)
        time.sleep(0.3)
    b = c.subscribe("probe-s", "sh", consumer_type=S)
    for i in range(5):
        t = time.monotonic()
        p.send(b"x")
        while True:
            try: a.receive(10); break
            except pulsar.Timeout: pass
            try: b.receive(10); break
            except pulsar.Timeout: pass
        print("latency2", time.monotonic() - t)
        time.sleep(0.3)
