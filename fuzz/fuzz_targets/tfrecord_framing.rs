//! The TFRecord framing reader on arbitrary bytes: never panics, terminates in skip mode with
//! every step consuming input, and every record it returns is really framed at its offset.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stokehold_io::tfrecord::writer::frame_into;
use stokehold_io::tfrecord::{Compression, OnCorrupt, ReadOptions, RecordReader};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else { return };
    let on_corrupt = if mode & 1 == 0 { OnCorrupt::Raise } else { OnCorrupt::Skip };
    let verify = mode & 2 == 0;
    let compression = match (mode >> 2) % 3 {
        0 => Compression::None,
        1 => Compression::Gzip,
        _ => Compression::Zlib,
    };
    let opts = ReadOptions { compression, verify, on_corrupt };
    let src = compression.wrap_reader(std::io::Cursor::new(body.to_vec()));
    let mut r = RecordReader::new("fuzz-input", src, opts);
    let mut steps = 0usize;
    loop {
        match r.next_ref() {
            Ok(Some((offset, rec))) => {
                if compression == Compression::None && verify {
                    // The record is framed exactly at its offset in the input.
                    let mut framed = Vec::new();
                    frame_into(&mut framed, rec);
                    let at = offset as usize;
                    assert_eq!(&body[at..at + framed.len()], &framed[..]);
                }
            }
            Ok(None) => break,
            Err(_) => {
                assert!(on_corrupt == OnCorrupt::Raise || compression != Compression::None);
                break;
            }
        }
        steps += 1;
        // Every record consumes 16 bytes and every skip at least 1 (of the decompressed stream,
        // which only for plain input is bounded by the input's size).
        assert!(compression != Compression::None || steps <= body.len() + 1, "no progress");
    }
    if compression == Compression::None {
        assert!(r.records() + r.skipped() <= body.len() as u64 + 1);
    }
});
