//! Tests of `member.rs`: the fault injector, the in-memory and file members.

use super::*;
use std::time::Instant;

fn fault(len: u64) -> (Arc<MemMember>, FaultMember) {
    let mem = Arc::new(MemMember::new("m0", len));
    let inner: Arc<dyn Member> = mem.clone();
    (mem, FaultMember::new(inner))
}

fn is_eio(r: io::Result<()>) -> bool {
    r.is_err_and(|e| e.raw_os_error() == Some(EIO))
}

#[test]
fn passes_through_when_healthy() {
    let (mem, f) = fault(64);
    f.write_at(&[1, 2, 3], 10).unwrap();
    let mut b = [0u8; 3];
    f.read_at(&mut b, 10).unwrap();
    f.sync().unwrap();
    assert_eq!(b, [1, 2, 3]);
    assert_eq!(&mem.contents()[10..13], &[1, 2, 3]);
    assert_eq!((f.ops(), f.failures()), (3, 0));
    assert_eq!((f.len_bytes(), f.path()), (64, "m0"));
}

#[test]
fn fail_after_ops_counts_from_the_call() {
    let (_, f) = fault(64);
    let mut b = [0u8; 4];
    f.read_at(&mut b, 0).unwrap();
    f.fail_after_ops(2);
    f.write_at(&b, 0).unwrap();
    f.sync().unwrap();
    assert!(is_eio(f.read_at(&mut b, 0)));
    assert!(is_eio(f.sync()));
    assert!(is_eio(f.write_at(&b, 8)));
    assert_eq!((f.ops(), f.failures()), (6, 3));
    f.heal();
    f.sync().unwrap();
    assert_eq!((f.ops(), f.failures()), (7, 3));
}

#[test]
fn fail_range_hits_only_overlapping_transfers() {
    let (mem, f) = fault(64);
    f.fail_range(16, 24);
    let mut b = [0u8; 8];
    f.read_at(&mut b, 8).unwrap(); // [8, 16): touches no byte of [16, 24)
    f.read_at(&mut b, 24).unwrap();
    assert!(is_eio(f.read_at(&mut b, 9))); // [9, 17)
    assert!(is_eio(f.write_at(&[7; 8], 20))); // [20, 28)
    assert!(is_eio(f.read_at(&mut b[..1], 23)));
    f.read_at(&mut [], 20).unwrap(); // empty: no byte touched
    f.sync().unwrap();
    assert_eq!((f.ops(), f.failures()), (7, 3));
    assert_eq!(
        &mem.contents()[20..28],
        &[0; 8],
        "a failed write wrote nothing"
    );
}

#[test]
fn fail_now_and_heal() {
    let (_, f) = fault(64);
    f.fail_now();
    assert!(is_eio(f.sync()));
    assert!(is_eio(f.write_at(&[1], 0)));
    f.heal();
    f.write_at(&[1], 0).unwrap();
    assert_eq!((f.ops(), f.failures()), (3, 2));
}

#[test]
fn short_io_tears_writes_and_cuts_reads() {
    let (mem, f) = fault(64);
    f.short_io(true);
    let e = f.write_at(&[9; 8], 0).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::WriteZero);
    assert_eq!(&mem.contents()[..8], &[9, 9, 9, 9, 0, 0, 0, 0]);
    let mut b = [0xaa_u8; 8];
    let e = f.read_at(&mut b, 2).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    assert_eq!(b, [9, 9, 0, 0, 0xaa, 0xaa, 0xaa, 0xaa]);
    f.sync().unwrap();
    f.short_io(false);
    f.read_at(&mut b, 0).unwrap();
    assert_eq!((f.ops(), f.failures()), (4, 2));
}

#[test]
fn delay_is_applied_and_capped() {
    let (_, f) = fault(64);
    f.delay(Duration::from_millis(20));
    let t = Instant::now();
    f.sync().unwrap();
    f.sync().unwrap();
    assert!(t.elapsed() >= Duration::from_millis(40));
    f.delay(Duration::from_secs(3600));
    assert_eq!(f.delay_nanos.load(Ordering::SeqCst), 1_000_000_000);
    f.delay(Duration::ZERO);
    assert_eq!((f.ops(), f.failures()), (2, 0));
}

#[test]
fn faults_set_from_another_thread() {
    let (_, f) = fault(64);
    let f = Arc::new(f);
    let g = f.clone();
    std::thread::spawn(move || g.fail_now()).join().unwrap();
    assert!(is_eio(f.sync()));
    assert_eq!(f.failures(), 1);
}

/// Removes the file when the test ends, passing or not.
struct TempFile(std::path::PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn file_member_round_trip() {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let name = format!("raidlab-member-{}-{nanos}", std::process::id());
    let tmp = TempFile(std::env::temp_dir().join(name));
    File::create(&tmp.0).unwrap().set_len(8192).unwrap();
    let m = FileMember::open(tmp.0.to_str().unwrap()).unwrap();
    assert_eq!(m.len_bytes(), 8192);
    assert_eq!(m.path(), tmp.0.to_str().unwrap());
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    m.write_at(&data, 4096).unwrap();
    m.sync().unwrap();
    let mut back = vec![0u8; 4096];
    m.read_at(&mut back, 4096).unwrap();
    assert_eq!(back, data);
    m.read_at(&mut back[..10], 0).unwrap();
    assert_eq!(&back[..10], &[0; 10], "unwritten bytes read as zeros");
    let e = m.read_at(&mut back, 6000).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
}

#[test]
fn a_file_member_skips_a_sync_only_when_nothing_was_written_since_one() {
    let tmp = TempFile(std::env::temp_dir().join(format!("raidlab-sync-{}", std::process::id())));
    File::create(&tmp.0).unwrap().set_len(8192).unwrap();
    let m = FileMember::open(tmp.0.to_str().unwrap()).unwrap();
    assert!(
        m.sync_needed(),
        "the first sync runs: earlier writers may not have synced"
    );
    m.sync().unwrap();
    assert!(!m.sync_needed());
    // Reads leave it clean; a write makes it dirty; a sync cleans it again.
    let mut b = [0u8; 16];
    m.read_at(&mut b, 0).unwrap();
    assert!(!m.sync_needed());
    m.write_at(&[1; 16], 0).unwrap();
    assert!(m.sync_needed());
    m.sync().unwrap();
    assert!(!m.sync_needed());
    m.write_at(&[2; 16], 16).unwrap();
    m.write_at(&[3; 16], 32).unwrap();
    assert!(m.sync_needed());
    m.sync().unwrap();
    assert!(!m.sync_needed());
}
