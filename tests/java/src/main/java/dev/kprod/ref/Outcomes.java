package dev.kprod.ref;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReferenceArray;

import org.apache.kafka.clients.producer.Callback;

/**
 * What became of each record of one stream of sends, filled by the producer's callbacks.
 *
 * <p>The outcome file has one line per record:
 * {@code ID<TAB>PARTITION<TAB>STATUS<TAB>OFFSET<TAB>ERROR}, where ID is the record's index
 * ({@code ledger}) or {@code STREAM:SEQ} ({@code seed}), STATUS is {@code delivered},
 * {@code failed} or {@code unresolved} (no callback within the bound), OFFSET is the
 * acknowledged offset or -1, and ERROR is the exception's class and message with tabs and
 * line breaks replaced by spaces (empty unless failed).
 */
final class Outcomes {
    static final String DELIVERED = "delivered";
    static final String FAILED = "failed";
    static final String UNRESOLVED = "unresolved";

    /** One record's outcome. */
    static final class Result {
        final String status;
        final long offset;
        final String error;

        Result(String status, long offset, String error) {
            this.status = status;
            this.offset = offset;
            this.error = error;
        }
    }

    private final String idPrefix;
    private final int[] partitions;
    private final AtomicReferenceArray<Result> results;
    private final CountDownLatch pending;
    /** Per record: nanoTime when {@code track} was called (just before {@code send}), then,
     *  once delivered, the time from there to the acknowledgement callback; -1 otherwise. */
    private final long[] latencyNanos;

    /** Room for {@code n} records, named {@code idPrefix + index}. */
    Outcomes(int n, String idPrefix) {
        this.idPrefix = idPrefix;
        this.partitions = new int[n];
        this.results = new AtomicReferenceArray<>(n);
        this.pending = new CountDownLatch(n);
        this.latencyNanos = new long[n];
    }

    int size() {
        return partitions.length;
    }

    /** Record {@code i} goes to {@code partition}; returns the callback that resolves it. */
    Callback track(int i, int partition) {
        partitions[i] = partition;
        long sentAt = System.nanoTime();
        latencyNanos[i] = -1;
        return (metadata, exception) -> {
            if (exception == null) {
                latencyNanos[i] = System.nanoTime() - sentAt;
            }
            if (exception != null) {
                resolve(i, new Result(FAILED, -1, describe(exception)));
            } else {
                long offset = metadata.hasOffset() ? metadata.offset() : -1;
                resolve(i, new Result(DELIVERED, offset, ""));
            }
        };
    }

    /**
     * Send-to-acknowledgement times of the delivered records, sorted. Read after
     * {@link #await} returned true (the latch orders the callbacks' writes before it).
     */
    long[] sortedLatencies() {
        return java.util.Arrays.stream(latencyNanos).filter(l -> l >= 0).sorted().toArray();
    }

    /** {@code send} threw: record {@code i} failed at once. */
    void refused(int i, Exception e) {
        resolve(i, new Result(FAILED, -1, "refused by send: " + describe(e)));
    }

    private void resolve(int i, Result r) {
        if (results.compareAndSet(i, null, r)) {
            pending.countDown();
        }
    }

    /** Waits until every record resolved or {@code timeoutMs} passed; true if all resolved. */
    boolean await(long timeoutMs) throws InterruptedException {
        return pending.await(timeoutMs, TimeUnit.MILLISECONDS);
    }

    /** The outcome of record {@code i}: unresolved if no callback came yet. */
    Result get(int i) {
        Result r = results.get(i);
        return r == null ? new Result(UNRESOLVED, -1, "") : r;
    }

    long count(String status) {
        long n = 0;
        for (int i = 0; i < size(); i++) {
            if (get(i).status.equals(status)) {
                n++;
            }
        }
        return n;
    }

    void write(BufferedWriter w) throws IOException {
        for (int i = 0; i < size(); i++) {
            Result r = get(i);
            w.write(idPrefix + i + "\t" + partitions[i] + "\t" + r.status + "\t" + r.offset + "\t"
                    + r.error + "\n");
        }
    }

    /** Writes the outcomes of every stream to {@code path}, replacing it atomically. */
    static void writeFile(Path path, List<Outcomes> streams) throws IOException {
        Path tmp = path.resolveSibling(path.getFileName() + ".tmp");
        try (BufferedWriter w = Files.newBufferedWriter(tmp, StandardCharsets.UTF_8)) {
            for (Outcomes o : streams) {
                o.write(w);
            }
        }
        Files.move(tmp, path, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }

    /** Class and message of an exception (and of its cause), on one line without tabs. */
    static String describe(Throwable e) {
        StringBuilder s = new StringBuilder(e.getClass().getName());
        if (e.getMessage() != null) {
            s.append(": ").append(e.getMessage());
        }
        Throwable cause = e.getCause();
        if (cause != null && cause != e) {
            s.append(" (caused by ").append(cause.getClass().getName());
            if (cause.getMessage() != null) {
                s.append(": ").append(cause.getMessage());
            }
            s.append(')');
        }
        return s.toString().replaceAll("[\\t\\r\\n]+", " ");
    }
}
