package dev.kprod.ref;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.CompilationMXBean;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;

/**
 * {@code bench}: the Java producer as one client of the e2e bench (tests/src/bin/bench-e2e.rs),
 * in one long-lived JVM that the bench drives over stdin, so that JVM start-up is never timed
 * and the JIT stays warm from one run to the next while the other clients take their turns.
 *
 * <p>Each stdin line {@code RUN TOPIC RECORDS} is one run, done like the bench's Rust clients
 * do theirs: a new producer, one warm-up record to partition 0 (connection, metadata and
 * producer id not timed), then {@code MEASURING} on stdout, then RECORDS records (record i: an
 * 8-byte big-endian counter and the bench's a..z filler, to partition i mod P unless
 * {@code --keyless}), waiting for every acknowledgement, then one {@code BENCH} line. The
 * producer is closed after the line, outside the window. One shared callback counts the
 * acknowledgements (no per-record object of ours, no latency bookkeeping), like the bench's
 * rdkafka client. CPU is {@code getProcessCpuTime} (every thread of this JVM: the caller, the
 * producer's I/O thread, JIT compiler and GC) over the same window as the wall time; the JIT
 * and GC figures are that window's share, for context.
 */
final class Bench {
    static final String USAGE = ""
            + "bench --bootstrap B [--size BYTES] [--partitions P] [--keyless yes|no]\n"
            + "      [--timeout-ms MS] [producer flags]\n"
            + "  serves the e2e bench: prints READY, then runs one run per stdin line\n"
            + "  'RUN TOPIC RECORDS' (new producer, warm-up record, 'MEASURING', the records, one\n"
            + "  'BENCH records=M failed=F unacknowledged=U seconds=S cpu_seconds=C jit_ms=J\n"
            + "  gc_ms=G gc_count=N first_error=E' line); ends at end of input\n"
            + "  --size BYTES            value size, at least 8 (default 100)\n"
            + "  --partitions P          record i goes to partition i mod P (default 4)\n"
            + "  --keyless yes|no        no partition: the producer's partitioner picks (default no)\n"
            + "  --timeout-ms MS         longest a run may wait for its acknowledgements\n"
            + "                          (default 300000)\n";

    private Bench() {}

    /** Counts acknowledgements; one instance per run, shared by every record. */
    private static final class Acks implements Callback {
        final CountDownLatch done;
        final AtomicLong failed = new AtomicLong();
        final AtomicReference<String> firstError = new AtomicReference<>();

        Acks(long records) {
            done = new CountDownLatch((int) records);
        }

        @Override
        public void onCompletion(RecordMetadata metadata, Exception e) {
            if (e != null) {
                failed.incrementAndGet();
                firstError.compareAndSet(null, Outcomes.describe(e));
            }
            done.countDown();
        }
    }

    static int run(Args a) throws Exception {
        ProducerSettings settings = new ProducerSettings(a, "bench-java");
        int size = a.int32("size", 100, 8);
        int partitions = a.int32("partitions", 4, 1);
        String keyless = a.optStr("keyless");
        if (keyless != null && !keyless.equals("yes") && !keyless.equals("no")) {
            throw new Args.UsageException("--keyless: expected yes or no, got '" + keyless + "'");
        }
        boolean noPartition = "yes".equals(keyless);
        long timeoutMs = a.integer("timeout-ms", 300_000, 1);
        a.finish();

        com.sun.management.OperatingSystemMXBean os =
                (com.sun.management.OperatingSystemMXBean) ManagementFactory
                        .getOperatingSystemMXBean();
        CompilationMXBean jit = ManagementFactory.getCompilationMXBean();
        List<GarbageCollectorMXBean> gcs = ManagementFactory.getGarbageCollectorMXBeans();
        byte[] filler = new byte[size];
        for (int j = 0; j < size; j++) {
            filler[j] = (byte) ('a' + j % 26);
        }

        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Main.say("READY");
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            if (w.length != 3 || !w[0].equals("RUN")) {
                throw new Args.UsageException("expected 'RUN TOPIC RECORDS' on stdin, got '"
                        + line + "'");
            }
            String topic = w[1];
            long records;
            try {
                records = Long.parseLong(w[2]);
            } catch (NumberFormatException e) {
                throw new Args.UsageException("RUN: '" + w[2] + "' is not a record count");
            }
            if (records < 1 || records > Integer.MAX_VALUE) {
                throw new Args.UsageException("RUN: record count out of range: " + records);
            }

            KafkaProducer<byte[], byte[]> producer = settings.create();
            producer.send(new ProducerRecord<>(topic, 0, null, filler.clone())).get(60,
                    TimeUnit.SECONDS);
            Acks acks = new Acks(records);
            Main.say("MEASURING");
            long jit0 = jit.isCompilationTimeMonitoringSupported()
                    ? jit.getTotalCompilationTime() : -1;
            long gcMs0 = gcTime(gcs);
            long gcN0 = gcCount(gcs);
            long cpu0 = os.getProcessCpuTime();
            long t0 = System.nanoTime();
            for (long i = 0; i < records; i++) {
                byte[] v = filler.clone();
                for (int k = 0; k < 8; k++) {
                    v[k] = (byte) (i >>> (56 - 8 * k));
                }
                Integer partition = noPartition ? null : (int) (i % partitions);
                producer.send(new ProducerRecord<>(topic, partition, null, v), acks);
            }
            boolean finished = acks.done.await(timeoutMs, TimeUnit.MILLISECONDS);
            long t1 = System.nanoTime();
            long cpu1 = os.getProcessCpuTime();
            long gcN1 = gcCount(gcs);
            long gcMs1 = gcTime(gcs);
            long jit1 = jit0 < 0 ? -1 : jit.getTotalCompilationTime();
            String first = acks.firstError.get();
            Main.say(String.format(java.util.Locale.ROOT,
                    "BENCH records=%d failed=%d unacknowledged=%d seconds=%.6f cpu_seconds=%.6f"
                            + " jit_ms=%d gc_ms=%d gc_count=%d first_error=%s",
                    records, acks.failed.get(), acks.done.getCount(), (t1 - t0) / 1e9,
                    (cpu1 - cpu0) / 1e9, jit0 < 0 ? -1 : jit1 - jit0, gcMs1 - gcMs0,
                    gcN1 - gcN0, first == null ? "none" : first.replaceAll("\\s+", "_")));
            producer.close(finished ? Duration.ofSeconds(30) : Duration.ZERO);
        }
        return 0;
    }

    private static long gcTime(List<GarbageCollectorMXBean> gcs) {
        long t = 0;
        for (GarbageCollectorMXBean g : gcs) {
            t += Math.max(0, g.getCollectionTime());
        }
        return t;
    }

    private static long gcCount(List<GarbageCollectorMXBean> gcs) {
        long n = 0;
        for (GarbageCollectorMXBean g : gcs) {
            n += Math.max(0, g.getCollectionCount());
        }
        return n;
    }
}
