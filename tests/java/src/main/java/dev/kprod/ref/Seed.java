package dev.kprod.ref;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;

/**
 * {@code seed}: the seed scenario of tests/src/seed.rs ({@code run_seed}) with the Java
 * producer. A ticker (stream 0) sends one record per period to partitions 0, 1, 2, ... in turn;
 * burst b (stream 1 + b, a thread of its own) starts once the ticker has sent
 * {@code (b + 1) * ticks / (bursts + 1)} records and sends {@code burst-size} records round robin
 * over the partitions, all outstanding before it waits for them. Values are
 * {@code kprod-seed RUN STREAM SEQ } padded with dots to {@code record-size} bytes, no key, so
 * the Rust verdict decodes them. Outcome ids are {@code STREAM:SEQ}.
 */
final class Seed {
    static final String USAGE = ""
            + "seed --bootstrap B --topic T --run HEX --out FILE [--partitions P] [--ticks N]\n"
            + "     [--period-us US] [--bursts N] [--burst-size N] [--record-size BYTES]\n"
            + "     [--resolve-timeout-ms MS] [producer flags]\n"
            + "  --run HEX               run id written into every value (16 hex digits)\n"
            + "  --partitions P          the topic's partitions (default 3)\n"
            + "  --ticks N               records the ticker sends (default 2000)\n"
            + "  --period-us US          the ticker's period (default 1000: 1 ms)\n"
            + "  --bursts N              bursts (default 3)\n"
            + "  --burst-size N          records per burst (default 10000)\n"
            + "  --record-size BYTES     value size (default 100)\n"
            + "  --resolve-timeout-ms MS how long a stream's records may take to resolve once it\n"
            + "                          sent its last one (default 120000)\n"
            + "  --out FILE              the outcome file\n"
            + "  stdout: 'TICKER ...', one 'BURST ...' line per burst, then 'DONE ...'\n";

    private static final String MAGIC = "kprod-seed";

    private Seed() {}

    /** The value of record SEQ of stream STREAM, as tests/src/seed.rs encode_value writes it. */
    static byte[] value(String run, int stream, long seq, int size) {
        byte[] head = (MAGIC + " " + run + " " + stream + " " + seq + " ")
                .getBytes(StandardCharsets.US_ASCII);
        if (head.length >= size) {
            return head;
        }
        byte[] v = Arrays.copyOf(head, size);
        Arrays.fill(v, head.length, size, (byte) '.');
        return v;
    }

    static int run(Args a) throws Exception {
        ProducerSettings settings = new ProducerSettings(a, "kprod-java-ref-seed");
        String topic = a.str("topic");
        String runHex = a.str("run");
        long runId;
        try {
            runId = Long.parseUnsignedLong(runHex, 16);
        } catch (NumberFormatException e) {
            throw new Args.UsageException("--run: '" + runHex + "' is not a hexadecimal u64");
        }
        String run = String.format("%016x", runId);
        int partitions = a.int32("partitions", 3, 1);
        int ticks = a.int32("ticks", 2000, 0);
        long periodNanos = a.integer("period-us", 1000, 1) * 1000;
        int bursts = a.int32("bursts", 3, 0);
        int burstSize = a.int32("burst-size", 10_000, 0);
        int recordSize = a.int32("record-size", 100, 0);
        long resolveTimeout = a.integer("resolve-timeout-ms", 120_000, 1);
        Path out = Path.of(a.str("out"));
        a.finish();

        Outcomes ticker = new Outcomes(ticks, "0:");
        List<Outcomes> streams = new ArrayList<>();
        streams.add(ticker);
        AtomicLong ticked = new AtomicLong();
        CountDownLatch[] go = new CountDownLatch[bursts];
        long[] triggers = new long[bursts];
        for (int b = 0; b < bursts; b++) {
            go[b] = new CountDownLatch(1);
            triggers[b] = (b + 1L) * ticks / (bursts + 1L);
            streams.add(new Outcomes(burstSize, (1 + b) + ":"));
        }
        AtomicReference<Throwable> crashed = new AtomicReference<>();
        String[] burstLines = new String[bursts];
        boolean[] resolved = new boolean[1 + bursts];

        long started = System.nanoTime();
        try (KafkaProducer<byte[], byte[]> producer = settings.create()) {
            List<Thread> threads = new ArrayList<>();
            for (int b = 0; b < bursts; b++) {
                int burst = b;
                Outcomes o = streams.get(1 + b);
                threads.add(thread("burst-" + b, crashed, () -> {
                    go[burst].await();
                    long ticksAtStart = ticked.get();
                    long t0 = System.nanoTime();
                    long bytes = 0;
                    for (int seq = 0; seq < burstSize; seq++) {
                        int partition = seq % partitions;
                        byte[] v = value(run, 1 + burst, seq, recordSize);
                        bytes += v.length;
                        send(producer, topic, partition, v, o, seq);
                    }
                    long enqueueNanos = System.nanoTime() - t0;
                    resolved[1 + burst] = o.await(resolveTimeout);
                    long duration = System.nanoTime() - t0;
                    burstLines[burst] = "BURST b=" + burst + " records=" + burstSize
                            + " bytes=" + bytes + " start_us=" + (t0 - started) / 1000
                            + " enqueue_us=" + enqueueNanos / 1000
                            + " duration_us=" + duration / 1000
                            + " ticks_at_start=" + ticksAtStart
                            + " ticks_during=" + (ticked.get() - ticksAtStart);
                }));
            }
            long[] tickerNanos = new long[1];
            threads.add(thread("ticker", crashed, () -> {
                try {
                    long first = System.nanoTime();
                    for (int seq = 0; seq < ticks; seq++) {
                        long due = first + seq * periodNanos;
                        for (long wait = due - System.nanoTime(); wait > 0;
                                wait = due - System.nanoTime()) {
                            LockSupport.parkNanos(wait);
                        }
                        send(producer, topic, seq % partitions,
                                value(run, 0, seq, recordSize), ticker, seq);
                        long n = ticked.incrementAndGet();
                        for (int b = 0; b < bursts; b++) {
                            if (go[b].getCount() > 0 && n >= triggers[b]) {
                                go[b].countDown();
                            }
                        }
                    }
                    tickerNanos[0] = System.nanoTime() - first;
                } finally {
                    // The ticker is done (or crashed): no burst waits any longer.
                    for (CountDownLatch g : go) {
                        g.countDown();
                    }
                }
                resolved[0] = ticker.await(resolveTimeout);
            }));
            for (Thread t : threads) {
                t.start();
            }
            for (Thread t : threads) {
                t.join();
            }
            if (crashed.get() != null) {
                throw new IllegalStateException("a sending thread failed", crashed.get());
            }
            long elapsed = System.nanoTime() - started;
            // The file first: closing abandons what is still outstanding.
            Outcomes.writeFile(out, streams);
            boolean all = true;
            for (boolean r : resolved) {
                all &= r;
            }
            producer.close(all ? Duration.ofSeconds(30) : Duration.ZERO);
            Main.say("TICKER records=" + ticks + " seconds=" + tickerNanos[0] / 1e9);
            for (String line : burstLines) {
                Main.say(line);
            }
            long delivered = 0;
            long failed = 0;
            long unresolved = 0;
            for (Outcomes o : streams) {
                delivered += o.count(Outcomes.DELIVERED);
                failed += o.count(Outcomes.FAILED);
                unresolved += o.count(Outcomes.UNRESOLVED);
            }
            Main.say(latencyLine("ticker", List.of(ticker)));
            Main.say(latencyLine("burst", streams.subList(1, streams.size())));
            Main.say("DONE records=" + (ticks + (long) bursts * burstSize) + " delivered="
                    + delivered + " failed=" + failed + " unresolved=" + unresolved
                    + " elapsed_us=" + elapsed / 1000);
            return all ? 0 : 1;
        }
    }

    /**
     * {@code LATENCY stream=NAME count=N p50_us=.. p99_us=.. p999_us=.. max_us=.. mean_us=..}:
     * the send-to-acknowledgement times of the delivered records of {@code streams}
     * (nearest-rank percentiles and the mean, as tests/src/bin/bench-scaling.rs computes
     * kprod's).
     */
    static String latencyLine(String name, List<Outcomes> streams) {
        long[] all = streams.stream()
                .flatMapToLong(o -> java.util.Arrays.stream(o.sortedLatencies()))
                .sorted()
                .toArray();
        StringBuilder s = new StringBuilder("LATENCY stream=" + name + " count=" + all.length);
        for (String[] q : new String[][] {{"p50", "0.5"}, {"p99", "0.99"}, {"p999", "0.999"},
                {"max", "1.0"}}) {
            long v = 0;
            if (all.length > 0) {
                int i = (int) Math.ceil(all.length * Double.parseDouble(q[1]));
                v = all[Math.min(Math.max(i, 1), all.length) - 1];
            }
            s.append(' ').append(q[0]).append("_us=").append(v / 1000);
        }
        long sum = 0;
        for (long v : all) {
            sum += v;
        }
        s.append(" mean_us=").append(all.length == 0 ? 0 : sum / all.length / 1000);
        return s.toString();
    }

    private static void send(KafkaProducer<byte[], byte[]> producer, String topic, int partition,
            byte[] value, Outcomes o, int seq) {
        try {
            producer.send(new ProducerRecord<>(topic, partition, null, value),
                    o.track(seq, partition));
        } catch (KafkaException e) {
            o.refused(seq, e);
        }
    }

    interface Body {
        void run() throws Exception;
    }

    private static Thread thread(String name, AtomicReference<Throwable> crashed, Body body) {
        Thread t = new Thread(() -> {
            try {
                body.run();
            } catch (Throwable e) {
                crashed.compareAndSet(null, e);
            }
        }, name);
        t.setDaemon(true);
        return t;
    }
}
