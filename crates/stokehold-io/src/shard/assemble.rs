//! [`assemble_shards`]: part folders written independently (by the tasks of a distributed write)
//! joined, in order, into one shard folder without decoding or re-compressing a record.
//!
//! Each record's stored bytes (already compressed and checksummed by the part's writer) are
//! appended with [`ShardWriter::push_encoded`], so shard boundaries follow the same byte rule as
//! [`super::write_shards`] over the whole record sequence: the folder is the same byte for byte
//! however the records were split into parts (pass the same `metadata`). The manifest is written
//! last and atomically, as by every writer of the crate.

use std::path::{Path, PathBuf};

use stokehold_core::{Error, Result};

use super::format::*;
use super::reader::read_manifest;
use super::writer::{Encoded, ShardWriter, WriteOptions};

/// Writes the records of the complete shard folders `parts`, in order, into `dir`; returns its
/// manifest. A part that is incomplete (no manifest), corrupt, or whose features differ from the
/// earlier parts' is an error naming it; then nothing in `dir` opens as a dataset.
pub fn assemble_shards(
    parts: &[PathBuf],
    dir: impl AsRef<Path>,
    opts: WriteOptions,
) -> Result<Manifest> {
    let mut w = ShardWriter::create(dir, opts)?;
    for part in parts {
        let m = read_manifest(part)?;
        if m.num_records > 0 {
            w.merge_schema(&m.schema, &format!("part {}", part.display()))?;
        }
        for entry in &m.shards {
            push_shard(&mut w, &part.join(&entry.file), entry.records)?;
        }
    }
    w.finish()
}

/// Appends every record of one shard file, checking its footer, index and record checksums.
fn push_shard(w: &mut ShardWriter, path: &Path, records: u64) -> Result<()> {
    let data = crate::storage::read_regular(path)?;
    if data.len() < HEADER_LEN + FOOTER_LEN {
        return Err(Error::corrupt(path, 0, "too short for a shard file"));
    }
    check_header(&data[..HEADER_LEN], path)?;
    let foot_at = data.len() - FOOTER_LEN;
    let footer = Footer::decode(&data[foot_at..], path, foot_at as u64)?;
    let index_end = (footer.records as usize)
        .checked_mul(ENTRY_LEN)
        .and_then(|n| n.checked_add(footer.index_offset as usize));
    if footer.records != records || index_end != Some(foot_at) {
        return Err(Error::corrupt(
            path,
            foot_at as u64,
            format!(
                "footer says {} records at {}, the manifest {records}",
                footer.records, footer.index_offset
            ),
        ));
    }
    let index = &data[footer.index_offset as usize..foot_at];
    if crc32c(index) != footer.index_crc {
        return Err(Error::corrupt(
            path,
            footer.index_offset,
            "index checksum mismatch",
        ));
    }
    for (k, raw) in index.chunks_exact(ENTRY_LEN).enumerate() {
        let e = Entry::decode(raw);
        let end = e.offset.checked_add(e.stored_len as u64);
        let stored = match end {
            Some(end) if e.offset >= HEADER_LEN as u64 && end <= footer.index_offset => {
                &data[e.offset as usize..end as usize]
            }
            _ => {
                return Err(Error::corrupt(
                    path,
                    e.offset,
                    format!("record {k}: index entry points outside the records"),
                ))
            }
        };
        if crc32c(stored) != e.crc {
            return Err(Error::corrupt(
                path,
                e.offset,
                format!("record {k}: checksum mismatch"),
            ));
        }
        w.push_encoded(Encoded::from_stored(
            stored.to_vec(),
            e.raw_len,
            e.codec,
            e.crc,
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::write_shards;
    use stokehold_core::Dataset;

    fn opts(metadata: &str) -> WriteOptions {
        let mut o = WriteOptions {
            shard_bytes: 4096,
            threads: 2,
            ..WriteOptions::default()
        };
        o.metadata.insert("source".into(), metadata.into());
        o
    }

    fn folder_bytes(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file())
            .map(|p| {
                (
                    p.file_name().unwrap().to_string_lossy().into_owned(),
                    std::fs::read(&p).unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn parts_assemble_to_the_folder_write_shards_makes() {
        let ds = Dataset::range(1000);
        let tmp = tempfile::tempdir().unwrap();
        let whole = tmp.path().join("whole");
        write_shards(&ds, &whole, opts("src"), None).unwrap();
        for cuts in [
            vec![0u64, 1000],
            vec![0, 3, 500, 501, 1000],
            vec![0, 0, 999, 1000],
        ] {
            let mut parts = Vec::new();
            for (j, w) in cuts.windows(2).enumerate() {
                let p = tmp.path().join(format!("p{}-{j}", cuts.len()));
                let part = ds.slice(w[0], w[1]);
                write_shards(
                    &part,
                    &p,
                    WriteOptions {
                        shard_bytes: u64::MAX,
                        ..opts("part")
                    },
                    None,
                )
                .unwrap();
                parts.push(p);
            }
            let out = tmp.path().join(format!("out{}", cuts.len()));
            let m = assemble_shards(&parts, &out, opts("src")).unwrap();
            assert_eq!(m.num_records, 1000);
            assert!(m.shards.len() > 1);
            assert_eq!(folder_bytes(&out), folder_bytes(&whole), "cuts {cuts:?}");
        }
    }

    #[test]
    fn an_incomplete_part_leaves_nothing_complete() {
        let tmp = tempfile::tempdir().unwrap();
        let good = tmp.path().join("good");
        write_shards(&Dataset::range(10), &good, opts("x"), None).unwrap();
        let missing = tmp.path().join("missing");
        std::fs::create_dir(&missing).unwrap();
        let out = tmp.path().join("out");
        let err = assemble_shards(&[good, missing], &out, opts("x")).unwrap_err();
        assert!(err.to_string().contains("incomplete dataset"), "{err}");
        assert!(read_manifest(&out).is_err());
    }
}
