package dev.kprod.ref;

/**
 * The Java reference producer (Apache Kafka's kafka-clients) for kprod's test suite.
 *
 * <p>Exit status: 0 when the command completed (records may still have failed: those are
 * data, in the outcome file), 1 when records did not resolve within the bound (or, for
 * throughput, failed), 2 for a usage error, 3 for any other failure.
 */
public final class Main {
    private static final String USAGE = ""
            + "usage: java -jar java-ref.jar COMMAND [--flag value ...]\n\n"
            + "commands:\n\n" + Ledger.USAGE + "\n" + Seed.USAGE + "\n" + Throughput.USAGE
            + "\n" + Bench.USAGE
            + "\nproducer flags (every command; idempotent, acks=all, no compression):\n"
            + ProducerSettings.FLAGS;

    private Main() {}

    /** Prints one protocol line on stdout, flushed at once (a test may be waiting for it). */
    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] argv) {
        int status;
        try {
            status = dispatch(argv);
        } catch (Args.UsageException e) {
            System.err.println("java-ref: " + e.getMessage());
            System.err.println();
            System.err.print(USAGE);
            status = 2;
        } catch (Throwable e) {
            System.err.println("java-ref: failed: " + Outcomes.describe(e));
            e.printStackTrace();
            status = 3;
        }
        System.out.flush();
        System.err.flush();
        // halt: no lingering non-daemon thread keeps the JVM alive.
        Runtime.getRuntime().halt(status);
    }

    private static int dispatch(String[] argv) throws Exception {
        if (argv.length == 0) {
            throw new Args.UsageException("no command");
        }
        String command = argv[0];
        if (command.equals("-h") || command.equals("--help") || command.equals("help")) {
            System.out.print(USAGE);
            return 0;
        }
        Args args = new Args(argv, 1);
        switch (command) {
            case "ledger":
                return Ledger.run(args);
            case "seed":
                return Seed.run(args);
            case "throughput":
                return Throughput.run(args);
            case "bench":
                return Bench.run(args);
            default:
                throw new Args.UsageException("unknown command '" + command + "'");
        }
    }
}
