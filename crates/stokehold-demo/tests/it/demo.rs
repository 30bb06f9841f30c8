//! The demo as a library call (what the Python package calls).

use stokehold_demo::demo::{run, DemoOptions};

fn small() -> DemoOptions {
    DemoOptions {
        clips: 10,
        min_seconds: 3.0,
        max_seconds: 8.0,
        epochs: 3,
        batch_size: 4,
        crop_seconds: 1.0,
        step_ms: 0.0,
        progress: false,
        ..DemoOptions::default()
    }
}

#[test]
fn report_figures_are_consistent() {
    let opts = small();
    let mut out = Vec::new();
    let r = run(&opts, &mut out).unwrap();
    assert_eq!(r.options, opts);
    assert_eq!(r.raw_bytes, r.total_samples * 2);
    assert!(r.max_clip_samples <= 8 * 16_000 && r.max_clip_samples >= 3 * 16_000);
    assert_eq!(r.padded_bytes, 10 * r.max_clip_samples * 2);
    assert!(r.padded_bytes >= r.raw_bytes);
    assert_eq!(r.batches_per_epoch, 3);
    assert_eq!(r.epoch_seconds.len(), 3);
    assert_eq!(r.first_batch_checksums.len(), 3);
    assert_eq!(r.boundaries.len(), 2);
    let b = &r.boundaries[1];
    assert_eq!(b.after_epoch, 1);
    let steady = r.steady_wait_ms.unwrap();
    assert!((b.stall_ms.unwrap() - (b.gap_ms - b.step_ms - steady)).abs() < 1e-9);
    assert_eq!(r.stall_target_met, r.stall_median_ms.map(|s| s < 1.0));
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains(&format!("{:016x}", r.first_batch_checksums[2])),
        "{text}"
    );
    if cfg!(target_os = "linux") {
        assert!(r.cache_rss_growth_bytes.is_some());
    }
}

#[test]
fn one_batch_per_epoch_has_no_stall_figure() {
    // Every batch starts an epoch: there is no steady batch to measure a stall against.
    let opts = DemoOptions {
        clips: 3,
        batch_size: 8,
        ..small()
    };
    let mut out = Vec::new();
    let r = run(&opts, &mut out).unwrap();
    assert_eq!(r.batches_per_epoch, 1);
    assert_eq!(r.boundaries.len(), 2);
    assert!(r.boundaries.iter().all(|b| b.stall_ms.is_none()));
    assert_eq!((r.stall_median_ms, r.stall_target_met), (None, None));
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("not measured (needs >= 2 epochs of >= 2 batches)"),
        "{text}"
    );
}

#[test]
fn options_round_trip_through_json_with_defaults() {
    // Python passes options as a dict; missing keys take the defaults.
    let opts: DemoOptions = serde_json::from_str(r#"{"clips": 12, "seed": 5}"#).unwrap();
    assert_eq!(
        opts,
        DemoOptions {
            clips: 12,
            seed: 5,
            ..DemoOptions::default()
        }
    );
}

#[test]
fn invalid_options_are_errors_not_panics() {
    let cases = [
        DemoOptions {
            clips: 0,
            ..small()
        },
        DemoOptions {
            epochs: 0,
            ..small()
        },
        DemoOptions {
            prefetch: 0,
            ..small()
        },
        DemoOptions {
            crop_seconds: 0.0,
            ..small()
        },
        DemoOptions {
            min_seconds: 9.0,
            max_seconds: 8.0,
            ..small()
        },
        DemoOptions {
            step_ms: f64::NAN,
            ..small()
        },
    ];
    for opts in cases {
        let err = run(&opts, &mut Vec::new()).unwrap_err().to_string();
        assert!(err.starts_with("invalid argument: demo:"), "{err}");
    }
}
