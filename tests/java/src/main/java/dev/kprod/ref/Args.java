package dev.kprod.ref;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * {@code --key value} flags. Each flag may appear once, except {@code --set} (repeatable
 * producer properties). Every flag a command does not read is an error: see {@link #finish()}.
 */
final class Args {
    /** A command-line mistake: reported with the usage text, exit status 2. */
    static final class UsageException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        UsageException(String message) {
            super(message);
        }
    }

    private final Map<String, String> values = new LinkedHashMap<>();
    private final List<String> sets = new ArrayList<>();
    private final Set<String> read = new HashSet<>();

    Args(String[] argv, int from) {
        for (int i = from; i < argv.length; i++) {
            String flag = argv[i];
            if (!flag.startsWith("--") || flag.length() == 2) {
                throw new UsageException("expected a --flag, got '" + flag + "'");
            }
            String name = flag.substring(2);
            if (i + 1 >= argv.length) {
                throw new UsageException(flag + " needs a value");
            }
            String value = argv[++i];
            if (name.equals("set")) {
                sets.add(value);
            } else if (values.putIfAbsent(name, value) != null) {
                throw new UsageException(flag + " given twice");
            }
        }
    }

    /** A required string flag. */
    String str(String name) {
        String v = optStr(name);
        if (v == null) {
            throw new UsageException("--" + name + " is required");
        }
        return v;
    }

    /** An optional string flag, or null. */
    String optStr(String name) {
        read.add(name);
        return values.get(name);
    }

    /** An integer flag at least {@code min}. */
    long integer(String name, long dflt, long min) {
        String v = optStr(name);
        if (v == null) {
            return dflt;
        }
        long n;
        try {
            n = Long.parseLong(v.replace("_", ""));
        } catch (NumberFormatException e) {
            throw new UsageException("--" + name + ": '" + v + "' is not an integer");
        }
        if (n < min) {
            throw new UsageException("--" + name + " must be at least " + min + ", got " + n);
        }
        return n;
    }

    int int32(String name, int dflt, int min) {
        long n = integer(name, dflt, min);
        if (n > Integer.MAX_VALUE) {
            throw new UsageException("--" + name + " is too large: " + n);
        }
        return (int) n;
    }

    /** A comma-separated list of integers at least {@code min}, or null when absent. */
    List<Long> integers(String name, long min) {
        String v = optStr(name);
        if (v == null) {
            return null;
        }
        List<Long> out = new ArrayList<>();
        for (String part : v.split(",")) {
            try {
                long n = Long.parseLong(part.trim());
                if (n < min) {
                    throw new UsageException("--" + name + ": " + n + " is below " + min);
                }
                out.add(n);
            } catch (NumberFormatException e) {
                throw new UsageException("--" + name + ": '" + part + "' is not an integer");
            }
        }
        if (out.isEmpty()) {
            throw new UsageException("--" + name + " is empty");
        }
        return out;
    }

    /** The {@code --set key=value} producer properties, in order. */
    Map<String, String> sets() {
        Map<String, String> out = new LinkedHashMap<>();
        for (String s : sets) {
            int eq = s.indexOf('=');
            if (eq <= 0) {
                throw new UsageException("--set expects key=value, got '" + s + "'");
            }
            out.put(s.substring(0, eq), s.substring(eq + 1));
        }
        return out;
    }

    /** Fails on every flag no getter asked for. */
    void finish() {
        for (String name : values.keySet()) {
            if (!read.contains(name)) {
                throw new UsageException("unknown option --" + name);
            }
        }
    }
}
