//! Runs every fuzz target's body over its committed seed corpus (`fuzz/corpus/<target>/`): what CI
//! executes on every run, with or without cargo-fuzz (fuzz/check.sh).

use std::path::Path;

#[test]
fn every_target_runs_over_its_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    for (name, body) in stokehold_fuzz::TARGETS {
        let dir = root.join(name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("corpus entry").path())
            .collect();
        files.sort();
        assert!(files.len() >= 3, "{name}: fewer than 3 seeds in {}", dir.display());
        for f in files {
            let data = std::fs::read(&f).expect("read seed");
            body(&data);
        }
    }
}
