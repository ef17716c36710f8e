/work/main/target-wt/release/deps/stats_alloc-91cf8ac750e12fb8.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/stats_alloc-0.1.10/src/lib.rs

/work/main/target-wt/release/deps/libstats_alloc-91cf8ac750e12fb8.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/stats_alloc-0.1.10/src/lib.rs

/work/main/target-wt/release/deps/libstats_alloc-91cf8ac750e12fb8.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/stats_alloc-0.1.10/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/stats_alloc-0.1.10/src/lib.rs:
