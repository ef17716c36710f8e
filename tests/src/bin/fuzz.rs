//! The long seeded fuzz run (see `kprod_tests::fuzz`):
//!
//! ```text
//! cargo run --release -p kprod-tests --bin fuzz -- --inputs 1000000 --seed 7
//! ```
//!
//! Half the inputs go to the response decoders, half to whole producers driven against the
//! broker model with hostile bytes. `--hit-known-bugs` stops avoiding the known kprod-core
//! bugs (the run then aborts or panics when it reaches one). Prints the counts and the time;
//! exits non-zero (with a reproduction line) on the first failure.

use std::process::ExitCode;
use std::time::Instant;

use kprod_tests::fuzz::{run, Options};

fn usage() -> ExitCode {
    eprintln!("usage: fuzz [--inputs N] [--seed N] [--hit-known-bugs]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut inputs: u64 = 1_000_000;
    let mut seed: u64 = 1;
    let mut options = Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let number = |v: Option<String>| {
            v.and_then(|v| match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => v.parse().ok(),
            })
        };
        match a.as_str() {
            "--inputs" => match number(args.next()) {
                Some(n) => inputs = n,
                None => return usage(),
            },
            "--seed" => match number(args.next()) {
                Some(n) => seed = n,
                None => return usage(),
            },
            "--hit-known-bugs" => options.avoid_known_bugs = false,
            _ => return usage(),
        }
    }
    let start = Instant::now();
    let report = run(seed, inputs, options);
    let took = start.elapsed();
    println!("{report}");
    println!(
        "{} inputs in {:.1} s ({:.0} inputs/s)",
        report.inputs(),
        took.as_secs_f64(),
        report.inputs() as f64 / took.as_secs_f64()
    );
    ExitCode::SUCCESS
}
