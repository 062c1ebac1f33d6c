import time, pulsar, struct, zlib
from proto import PulsarApi_pb2 as pb
def test_probe(gateway, client_factory, redis_clean):
    c = client_factory(gateway.url)
    p = c.create_producer("probe-z", batching_enabled=False, compression_type=pulsar.CompressionType.ZLib)
    p.send(b"")
    (eid, f), = redis_clean.xrange("pgw:{persistent://public/default/probe-z}:stream")
    blob = f[b"m"]
    (size,) = struct.unpack(">I", blob[6:10])
    md = pb.MessageMetadata(); md.ParseFromString(blob[10:10+size])
    payload = blob[10+size:]
    print(md, payload.hex(), zlib.decompress(payload))
