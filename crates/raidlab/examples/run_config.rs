//! Run a config file with the core alone (no Python): `cargo run --release --example
//! run_config -- FILE.toml`. Prints each run's metrics as JSON, without the time series.
//! Handy for profiling the engine.

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: run_config FILE.toml");
        std::process::exit(2);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(2);
        }
    };
    let exps = match raidlab::config::from_toml(&text, &path, None) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    for exp in &exps {
        match raidlab::engine::run(exp) {
            Ok(m) => {
                let mut v = m.to_json();
                if let Some(o) = v.as_object_mut() {
                    o.remove("series");
                }
                println!("{}: {v}", exp.name);
            }
            Err(e) => {
                eprintln!("{}: {e}", exp.name);
                std::process::exit(2);
            }
        }
    }
}
