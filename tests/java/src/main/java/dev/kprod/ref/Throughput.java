package dev.kprod.ref;

import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * {@code throughput}: the measurement of the kprod / rdkafka e2e bench (tests/src/bin/bench-e2e.rs)
 * with the Java producer. Record i has an 8-byte big-endian counter followed by the bench's
 * a..z filler, goes to partition i mod P, no key. One warm-up record first (connection,
 * metadata, producer id are not timed), then per round: wall time from the first send to the
 * last acknowledgement, this process's CPU time over the same interval (every thread: the
 * sender, the producer's I/O thread, JIT and GC), and send-to-acknowledgement latency.
 */
final class Throughput {
    static final String USAGE = ""
            + "throughput --bootstrap B --topic T [--records M] [--size BYTES] [--partitions P]\n"
            + "           [--rounds R] [--timeout-ms MS] [producer flags]\n"
            + "  --records M             records per round (default 200000)\n"
            + "  --size BYTES            value size, at least 8 (default 100)\n"
            + "  --partitions P          record i goes to partition i mod P (default 4)\n"
            + "  --rounds R              rounds in this JVM, one line each (default 1)\n"
            + "  --timeout-ms MS         longest a round may take (default 300000)\n"
            + "  stdout, per round: 'THROUGHPUT round=R records=M failed=F seconds=S\n"
            + "    records_per_sec=X cpu_seconds=C cpu_us_per_record=U p50_ms=.. p99_ms=..\n"
            + "    p999_ms=.. max_ms=..'\n"
            + "  exit status 1 when a record failed or a round timed out\n";

    private Throughput() {}

    static int run(Args a) throws Exception {
        ProducerSettings settings = new ProducerSettings(a, "kprod-java-ref-throughput");
        String topic = a.str("topic");
        int records = a.int32("records", 200_000, 1);
        int size = a.int32("size", 100, 8);
        int partitions = a.int32("partitions", 4, 1);
        int rounds = a.int32("rounds", 1, 1);
        long timeoutMs = a.integer("timeout-ms", 300_000, 1);
        a.finish();

        com.sun.management.OperatingSystemMXBean os =
                (com.sun.management.OperatingSystemMXBean) ManagementFactory
                        .getOperatingSystemMXBean();
        byte[] filler = new byte[size];
        for (int j = 0; j < size; j++) {
            filler[j] = (byte) ('a' + j % 26);
        }
        int status = 0;
        try (KafkaProducer<byte[], byte[]> producer = settings.create()) {
            producer.send(new ProducerRecord<>(topic, 0, null, filler.clone())).get(60,
                    TimeUnit.SECONDS);
            for (int round = 1; round <= rounds; round++) {
                long[] sentAt = new long[records];
                long[] latency = new long[records];
                CountDownLatch done = new CountDownLatch(records);
                AtomicLong failed = new AtomicLong();
                AtomicReference<String> firstError = new AtomicReference<>();
                long cpu0 = os.getProcessCpuTime();
                long t0 = System.nanoTime();
                for (int i = 0; i < records; i++) {
                    byte[] v = filler.clone();
                    for (int k = 0; k < 8; k++) {
                        v[k] = (byte) (((long) i) >>> (56 - 8 * k));
                    }
                    int idx = i;
                    sentAt[i] = System.nanoTime();
                    producer.send(new ProducerRecord<>(topic, i % partitions, null, v),
                            (metadata, e) -> {
                                latency[idx] = System.nanoTime() - sentAt[idx];
                                if (e != null) {
                                    failed.incrementAndGet();
                                    firstError.compareAndSet(null, Outcomes.describe(e));
                                }
                                done.countDown();
                            });
                }
                boolean finished = done.await(timeoutMs, TimeUnit.MILLISECONDS);
                long t1 = System.nanoTime();
                long cpu1 = os.getProcessCpuTime();
                if (!finished) {
                    System.err.println("round " + round + ": " + done.getCount()
                            + " records unacknowledged after " + timeoutMs + " ms");
                    return 1;
                }
                double secs = (t1 - t0) / 1e9;
                double cpuSecs = (cpu1 - cpu0) / 1e9;
                long[] sorted = latency.clone();
                Arrays.sort(sorted);
                Main.say(String.format(java.util.Locale.ROOT,
                        "THROUGHPUT round=%d records=%d failed=%d seconds=%.6f records_per_sec=%.1f"
                                + " cpu_seconds=%.6f cpu_us_per_record=%.4f p50_ms=%.3f"
                                + " p99_ms=%.3f p999_ms=%.3f max_ms=%.3f",
                        round, records, failed.get(), secs, records / secs, cpuSecs,
                        cpuSecs * 1e6 / records, pct(sorted, 0.50), pct(sorted, 0.99),
                        pct(sorted, 0.999), sorted[sorted.length - 1] / 1e6));
                if (failed.get() > 0) {
                    System.err.println("round " + round + ": " + failed.get()
                            + " records failed; first: " + firstError.get());
                    status = 1;
                }
            }
            producer.close(Duration.ofSeconds(30));
        }
        return status;
    }

    /** The q-quantile of sorted nanoseconds, in milliseconds (nearest rank). */
    private static double pct(long[] sorted, double q) {
        int rank = (int) Math.ceil(q * sorted.length);
        return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))] / 1e6;
    }
}
