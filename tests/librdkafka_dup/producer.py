"""The fault harness's item 14 on purpose (README, "What we test and what it found"): librdkafka,
idempotent at acks=all, writes a batch twice when its own epoch bump lands between a
NOT_LEADER_OR_FOLLOWER answer for the batch and its retry.

One producer writes q-0 (RF 3, min ISR 2) at 2,000 msg/s and, every tenth message, one partition
of topic u (RF 1) led by broker D. At 3 s it pauses D (SIGSTOP): u's messages start timing out
after message.timeout.ms (3 s), and each timeout makes librdkafka bump its producer epoch and
renumber every queued message from sequence 0. Just before that, it sends q-0's leader A SIGTERM
(a controlled shutdown): an appended batch that the next leader has replicated but the high
watermark does not cover yet is answered NOT_LEADER_OR_FOLLOWER, which librdkafka counts as not
persisted and queues again. If an epoch bump renumbers it before the retry lands, no broker can
tell the retry from new records and the batch is in the log twice. D is resumed at 6.4 s so the
retry can succeed before it times out. Then it reads q-0 back and prints counts as JSON.

Usage: producer.py A_PID D_PID D_PARTITION TERM_AFTER_S CONT_AFTER_S (both after the SIGSTOP).
Signals only the two PIDs it is given. librdkafka's eos/msg trace goes to stderr."""
import json, os, signal, sys, time
from confluent_kafka import Producer, Consumer, TopicPartition

a_pid, d_pid, u_part = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
term_at, cont_at = float(sys.argv[4]), float(sys.argv[5])
p = Producer({
    "bootstrap.servers": "127.0.0.2:9092,127.0.0.3:9092,127.0.0.1:9092",
    "enable.idempotence": True, "acks": "all", "linger.ms": 2,
    "message.timeout.ms": 3000, "debug": "eos,msg,topic", "log_level": 7,
})
acked, failed = {}, {}
def dr(err, msg):
    v = msg.value().decode()
    if err is None:
        acked[v] = (msg.partition(), msg.offset())
    else:
        failed[v] = str(err)
try:
    start = time.time()
    stopped = termed = resumed = False
    n = 0
    while time.time() - start < 14:
        t = time.time() - start
        if not stopped and t >= 3:
            os.kill(d_pid, signal.SIGSTOP); stopped = True; print(f"SIGSTOP D at {t:.2f}", flush=True)
        if not termed and t >= 3 + term_at:
            os.kill(a_pid, signal.SIGTERM); termed = True; print(f"SIGTERM A at {t:.2f}", flush=True)
        if not resumed and t >= 3 + cont_at:
            os.kill(d_pid, signal.SIGCONT); resumed = True; print(f"SIGCONT D at {t:.2f}", flush=True)
        due = start + n / 2000.0
        while time.time() < due:
            p.poll(max(0.0, min(0.001, due - time.time())))
        p.produce("q", value=f"q-{n}".encode(), partition=0, on_delivery=dr)
        if n % 10 == 0:
            p.produce("u", value=f"u-{n}".encode(), partition=u_part, on_delivery=dr)
        n += 1
finally:
    # Never leave the broker paused, whatever happened above.
    os.kill(d_pid, signal.SIGCONT)
p.flush(60)
c = Consumer({"bootstrap.servers": "127.0.0.1:9092,127.0.0.2:9092,127.0.0.3:9092", "group.id": "r", "enable.auto.commit": False})
c.assign([TopicPartition("q", 0, 0)])
seen = {}
idle = 0
while idle < 6:
    m = c.poll(0.5)
    if m is None:
        idle += 1; continue
    if m.error():
        continue
    idle = 0
    seen.setdefault(m.value().decode(), []).append(m.offset())
dups = {v: o for v, o in seen.items() if len(o) > 1}
qacked = [v for v in acked if v.startswith("q-")]
missing = [v for v in qacked if v not in seen]
print(json.dumps({"sent_q": n, "acked_q": len(qacked), "failed": len(failed), "failed_u": sum(1 for v in failed if v.startswith("u-")),
                  "read_q": len(seen), "missing": len(missing), "duplicated": len(dups), "dups": dict(list(dups.items())[:5])}))
