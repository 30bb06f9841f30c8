use std::io::Write;

use stokehold_core::{DatasetIter, Parallelism};

use super::*;
use crate::table::npy::encode_header;

fn write_npy(path: &Path, values: &[f32]) {
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(&encode_header(stokehold_core::DType::F32, &[values.len()], 0).unwrap())
        .unwrap();
    for v in values {
        f.write_all(&v.to_le_bytes()).unwrap();
    }
}

fn paths(ds: &Dataset, epoch: u64) -> Vec<String> {
    ds.iter(epoch)
        .unwrap()
        .collect_all()
        .unwrap()
        .iter()
        .map(|e| {
            String::from_utf8(e.tensor("t", "path").unwrap().string(0).unwrap().to_vec()).unwrap()
        })
        .collect()
}

#[test]
fn list_files_sorts_dedups_and_shuffles_per_epoch() {
    let dir = tempfile::tempdir().unwrap();
    for i in [3, 1, 2, 10] {
        std::fs::write(dir.path().join(format!("f{i}.bin")), b"x").unwrap();
    }
    std::fs::create_dir(dir.path().join("sub.bin")).unwrap();
    let pat = format!("{}/*.bin", dir.path().display());
    let pat1 = format!("{}/f1.bin", dir.path().display());
    let ds = list_files(&[pat.as_str(), pat1.as_str()], None).unwrap();
    let got = paths(&ds, 0);
    let names: Vec<_> = got
        .iter()
        .map(|p| p.rsplit('/').next().unwrap().to_string())
        .collect();
    assert_eq!(names, vec!["f1.bin", "f10.bin", "f2.bin", "f3.bin"]);
    let sh = list_files(&[pat.as_str()], Some(4)).unwrap();
    let (e0, e1) = (paths(&sh, 0), paths(&sh, 1));
    assert_eq!(e0, paths(&list_files(&[pat.as_str()], Some(4)).unwrap(), 0));
    let mut s0 = e0.clone();
    s0.sort();
    assert_eq!(s0, got);
    assert!(
        e0 != got || e1 != got,
        "shuffle changed nothing over two epochs"
    );
}

#[test]
fn index_sidecars_are_left_out_beside_their_files() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["train-0.tfrecord", "train-0.tfrecord.idx", "train-1.idx"] {
        std::fs::write(dir.path().join(name), b"x").unwrap();
    }
    let names = |pat: &str| -> Vec<String> {
        let pat = format!("{}/{pat}", dir.path().display());
        let ds = list_files(&[pat.as_str()], None).unwrap();
        paths(&ds, 0)
            .iter()
            .map(|p| p.rsplit('/').next().unwrap().to_string())
            .collect()
    };
    // train-1.idx has no data file beside it: it is a file like any other.
    assert_eq!(names("train-*"), ["train-0.tfrecord", "train-1.idx"]);
    assert_eq!(names("*.idx"), ["train-0.tfrecord.idx", "train-1.idx"]);
}

#[test]
fn glob_matching_nothing_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let pat = format!("{}/*.npy", dir.path().display());
    let Err(err) = list_files(&[pat.as_str()], None) else {
        panic!("no error")
    };
    assert!(
        matches!(&err, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    );
    assert!(err.to_string().contains(&pat), "{err}");
    assert!(list_files(&["[bad"], None).is_err());
}

#[test]
fn npy_loads_lazily_in_parallel_and_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..20usize {
        let v: Vec<f32> = (0..i + 1).map(|k| (i * 100 + k) as f32).collect();
        write_npy(&dir.path().join(format!("a{i:02}.npy")), &v);
    }
    let pat = format!("{}/*.npy", dir.path().display());
    let ds = list_files(&[pat.as_str()], Some(1))
        .unwrap()
        .map("load", load_npy_fn("path", "x"));
    let seq = ds.iter(0).unwrap().collect_all().unwrap();
    let par = ds
        .parallelize(Parallelism::Fixed(4), true)
        .iter(0)
        .unwrap()
        .collect_all()
        .unwrap();
    assert_eq!(seq, par);
    for e in &seq {
        let x = e.tensor("t", "x").unwrap().to_vec::<f32>().unwrap();
        let p =
            String::from_utf8(e.tensor("t", "path").unwrap().string(0).unwrap().to_vec()).unwrap();
        let i: usize = p[p.len() - 6..p.len() - 4].parse().unwrap();
        assert_eq!(x.len(), i + 1);
        assert_eq!(x[0], (i * 100) as f32);
    }
    // A file that disappears after listing: the error names it.
    let gone = dir.path().join("a07.npy");
    std::fs::remove_file(&gone).unwrap();
    let err = ds
        .parallelize(Parallelism::Fixed(2), true)
        .iter(0)
        .unwrap()
        .collect_all()
        .unwrap_err();
    assert!(
        matches!(err, Error::Io { ref path, .. } if path == &gone),
        "{err}"
    );
    // A truncated file: corrupt, with the file and the data offset.
    let bad = dir.path().join("a03.npy");
    let full = std::fs::read(&bad).unwrap();
    std::fs::write(&bad, &full[..full.len() - 2]).unwrap();
    let err = read_npy(&bad).unwrap_err().to_string();
    assert!(
        err.contains("a03.npy") && err.contains("offset 128"),
        "{err}"
    );
    std::fs::write(&bad, b"not numpy").unwrap();
    assert!(read_npy(&bad).unwrap_err().to_string().contains("a03.npy"));
}

#[cfg(unix)]
#[test]
fn unreadable_file_is_named() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("secret.bin");
    std::fs::write(&p, b"abc").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o000)).unwrap();
    if std::fs::read(&p).is_ok() {
        return; // running as root: permissions are not enforced
    }
    let pat = p.display().to_string();
    let ds = list_files(&[pat.as_str()], None)
        .unwrap()
        .map("read", read_file_fn("path", "data"));
    let err = ds.iter(0).unwrap().collect_all().unwrap_err();
    assert!(
        matches!(err, Error::Io { ref path, .. } if path == &p),
        "{err}"
    );
}

#[test]
fn read_file_gives_whole_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.txt");
    std::fs::write(&p, b"hello world").unwrap();
    let pat = p.display().to_string();
    let ds = list_files(&[pat.as_str()], None)
        .unwrap()
        .map("read", read_file_fn("path", "data"));
    let e = ds.iter(0).unwrap().next().unwrap().unwrap();
    assert_eq!(
        e.tensor("t", "data").unwrap().string(0),
        Some(&b"hello world"[..])
    );
}
