//! Hedged requests against moto through a proxy that stalls a fraction of the shard reads for a
//! minute: every read succeeds with the right bytes, and the whole read finishes while the
//! stalled requests are still held (the hedges answered them).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use stokehold_io::shard::{Compression, ShardDataset};
use stokehold_io::storage::remote;

use super::remote::{assert_same, shard_opts, source, upload_dir};
use super::remote_server::{make_bucket, moto, Fault, Proxy, STALL};

#[test]
fn stalled_reads_are_hedged_and_finish_before_the_stall_ends() {
    moto();
    make_bucket("stalling");
    let dir = tempfile::tempdir().unwrap();
    stokehold_io::shard::write_shards(
        &source(240),
        dir.path(),
        shard_opts(Compression::None),
        None,
    )
    .unwrap();
    upload_dir(dir.path(), "s3://stalling/ds");
    // Every 5th GET of a shard (opening's header, footer and index reads included) is held for
    // STALL before it is forwarded; the same request again (the hedge) is not.
    let shard_gets = Arc::new(AtomicUsize::new(0));
    let counter = shard_gets.clone();
    let proxy = Proxy::start(move |_, m, t| {
        let shard = m == "GET" && t.split('?').next().unwrap().ends_with(".stk");
        if shard && counter.fetch_add(1, Ordering::SeqCst) % 5 == 4 {
            Fault::StallFirst
        } else {
            Fault::Pass
        }
    });
    proxy.route("stalling");
    let before = remote::stats();
    let local = ShardDataset::open(dir.path()).unwrap();
    // The read runs on a thread so that a hang fails the test instead of blocking it; the bound
    // is a hang guard well under the stall, not a speed figure.
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let remote = ShardDataset::open("s3://stalling/ds").unwrap();
        assert_same(&local, &remote);
        let _ = tx.send(());
    });
    let guard = STALL - Duration::from_secs(15);
    match rx.recv_timeout(guard) {
        Ok(()) => reader.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            reader.join().unwrap(); // re-raises the reader's assertion
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("the read did not finish within {guard:?}"),
    }
    let stalled = proxy.faults.load(Ordering::SeqCst);
    let after = remote::stats();
    assert!(stalled >= 5, "stalls were injected: {stalled}");
    assert!(
        after.hedges - before.hedges >= stalled as u64,
        "every stalled read was hedged: {before:?} -> {after:?}, {stalled} stalled"
    );
    assert!(
        after.hedge_wins - before.hedge_wins >= stalled as u64,
        "the hedges answered: {before:?} -> {after:?}"
    );
}
