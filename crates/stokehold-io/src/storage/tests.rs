use super::*;

#[test]
fn local_files_read_by_range_whole_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.bin");
    write(&a, Bytes::from_static(b"0123456789")).unwrap();
    std::fs::write(dir.path().join("b.bin"), b"xy").unwrap();
    let o = open_object(&a).unwrap();
    assert!(!o.is_remote());
    assert_eq!(o.size(), 10);
    assert_eq!(o.read_range(2..5).unwrap().as_ref(), b"234");
    let parts = o.read_ranges(&[0..1, 8..10, 3..3]).unwrap();
    assert_eq!(
        parts,
        vec![
            Bytes::from_static(b"0"),
            Bytes::from_static(b"89"),
            Bytes::new()
        ]
    );
    let err = o.read_range(5..11).unwrap_err().to_string();
    assert!(err.contains("a.bin") && err.contains("outside"), "{err}");
    assert_eq!(read(&a).unwrap().as_ref(), b"0123456789");
    assert!(matches!(open(&a).unwrap(), Source::Mapped { .. }));
    let pat = format!("{}/*.bin", dir.path().display());
    let names: Vec<u64> = list(&pat).unwrap().iter().map(|m| m.size).collect();
    assert_eq!(names, vec![10, 2]);
    assert_eq!(head(&dir.path().join("none")).unwrap(), None);
}

#[cfg(not(feature = "remote"))]
#[test]
fn urls_without_the_remote_feature_are_a_clear_error() {
    let err = read(Path::new("s3://bucket/x")).unwrap_err().to_string();
    assert!(
        err.contains("s3://bucket/x") && err.contains("remote"),
        "{err}"
    );
}
