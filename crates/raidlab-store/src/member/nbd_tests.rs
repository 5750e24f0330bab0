//! The remote member against a real NBD server, `nbdkit` on a Unix socket the test made
//! (skipped with a message where nbdkit is not installed).

use super::*;
use crate::ctrl::tests_pattern::pattern;
use crate::format::testutil::TempDir;
use std::process::{Child, Command, Stdio};

/// An `nbdkit` the test started; killed (and waited for) when dropped.
pub(crate) struct Nbdkit {
    child: Option<Child>,
    pub(crate) socket: std::path::PathBuf,
    args: Vec<String>,
}

impl Nbdkit {
    /// `nbdkit ARGS...` serving on `socket`; `None` (after a message) without nbdkit.
    pub(crate) fn start(socket: &std::path::Path, args: &[&str]) -> Option<Nbdkit> {
        let mut k = Nbdkit {
            child: None,
            socket: socket.to_path_buf(),
            args: args.iter().map(|s| s.to_string()).collect(),
        };
        if !k.spawn() {
            eprintln!("skipped: nbdkit is not installed (scripts/ensure-debs.sh installs it)");
            return None;
        }
        Some(k)
    }

    fn spawn(&mut self) -> bool {
        let _ = std::fs::remove_file(&self.socket);
        let child = Command::new("nbdkit")
            .args(["--foreground", "--exit-with-parent", "--unix"])
            .arg(&self.socket)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let Ok(child) = child else { return false };
        self.child = Some(child);
        // Bounded: 10 s for the socket to appear.
        for _ in 0..1000 {
            if std::os::unix::net::UnixStream::connect(&self.socket).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("nbdkit {:?} did not listen within 10 s", self.args);
    }

    pub(crate) fn uri(&self) -> String {
        format!("nbd+unix:///?socket={}", self.socket.display())
    }

    pub(crate) fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kill it and start it again with the same arguments.
    pub(crate) fn restart(&mut self) {
        self.kill();
        assert!(self.spawn(), "nbdkit restarts");
    }
}

impl Drop for Nbdkit {
    fn drop(&mut self) {
        self.kill();
    }
}

fn is_conn_loss(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotConnected | io::ErrorKind::TimedOut
    )
}

#[test]
fn uris_are_told_from_paths_and_name_one_identity() {
    assert!(is_uri("nbd://h:1/e") && is_uri("nbd+unix:///e?socket=/s"));
    assert!(!is_uri("disk0") && !is_uri("/dev/nbd0") && !is_uri("nbd:/x"));
    let a = uri_identity("nbd://h:10809/e").unwrap();
    assert_eq!(a, uri_identity("nbd://h/e").unwrap(), "default port");
    assert_ne!(a, uri_identity("nbd://h/f").unwrap());
    assert_ne!(a, uri_identity("nbd://g/e").unwrap());
    assert!(uri_identity("nbd+unix:///e").is_err(), "no socket");
    let p = std::path::Path::new("nbd://h/e");
    assert_eq!(DevId::of_path(p).unwrap(), a);
}

#[test]
fn many_threads_share_one_connection() {
    let t = TempDir::new("nbdm-rw");
    let Some(k) = Nbdkit::start(&t.path().join("s"), &["memory", "size=4M"]) else {
        return;
    };
    let m = Arc::new(NbdMember::open(&k.uri()).unwrap());
    assert_eq!(m.len_bytes(), 4 << 20);
    assert!(m.connected() && m.link().is_some());
    let threads: Vec<_> = (0..8u64)
        .map(|i| {
            let m = Arc::clone(&m);
            std::thread::spawn(move || {
                for j in 0..16u64 {
                    let data = pattern(i * 100 + j, 8192);
                    let at = (i * 16 + j) * 8192;
                    m.write_at(&data, at).unwrap();
                    let mut back = vec![0u8; 8192];
                    m.read_at(&mut back, at).unwrap();
                    assert_eq!(back, data);
                }
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    m.sync().unwrap();
    // A transfer larger than one request is split.
    let big = pattern(7, 6 << 19);
    m.write_at(&big, 512).unwrap();
    let mut back = vec![0u8; big.len()];
    m.read_at(&mut back, 512).unwrap();
    assert_eq!(back, big);
    let e = m.read_at(&mut [0u8; 10], (4 << 20) - 5).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    assert_eq!(m.drops(), 0);
}

#[test]
fn a_killed_server_is_a_lost_connection_and_a_restarted_one_reconnects() {
    let t = TempDir::new("nbdm-kill");
    let img = t.path().join("img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let file = format!("file={}", img.display());
    let Some(mut k) = Nbdkit::start(&t.path().join("s"), &["file", &file]) else {
        return;
    };
    let m = NbdMember::open(&k.uri()).unwrap();
    m.write_at(&[7; 4096], 8192).unwrap();
    m.sync().unwrap();
    k.kill();
    let e = m.read_at(&mut [0u8; 4096], 0).unwrap_err();
    assert!(is_conn_loss(&e), "{e}");
    assert!(!m.connected());
    let e = m.sync().unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotConnected, "{e}");
    assert!(m.reconnect().is_err(), "nobody listens");
    k.restart();
    m.reconnect().unwrap();
    assert!(m.connected());
    let mut b = [0u8; 4096];
    m.read_at(&mut b, 8192).unwrap();
    assert_eq!(b, [7; 4096], "the flushed write is on the file");
    assert_eq!(m.drops(), 1);
}

#[test]
fn a_slow_host_times_out_and_a_server_eio_keeps_the_connection() {
    let t = TempDir::new("nbdm-slow");
    let Some(_k) = Nbdkit::start(
        &t.path().join("s"),
        &["--filter=delay", "memory", "size=1M", "delay-read=2"],
    ) else {
        return;
    };
    let m = NbdMember::open(&_k.uri()).unwrap();
    m.set_timeout(Duration::from_millis(200));
    m.write_at(&[1; 512], 0).unwrap();
    let at = Instant::now();
    let e = m.read_at(&mut [0u8; 512], 0).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
    assert!(at.elapsed() < Duration::from_secs(1), "{:?}", at.elapsed());
    assert!(!m.connected());

    let Some(k2) = Nbdkit::start(
        &t.path().join("e"),
        &["--filter=error", "memory", "size=1M", "error-pwrite-rate=1"],
    ) else {
        return;
    };
    let m = NbdMember::open(&k2.uri()).unwrap();
    let e = m.write_at(&[1; 512], 0).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(5), "EIO from the export: {e}");
    assert!(m.connected(), "an export's error is no host failure");
    m.read_at(&mut [0u8; 512], 0).unwrap();

    // ESHUTDOWN: the server is going away, so the host is, not the disk.
    let Some(k3) = Nbdkit::start(
        &t.path().join("x"),
        &[
            "--filter=error",
            "memory",
            "size=1M",
            "error=ESHUTDOWN",
            "error-pread-rate=1",
        ],
    ) else {
        return;
    };
    let m = NbdMember::open(&k3.uri()).unwrap();
    m.write_at(&[1; 512], 0).unwrap();
    let e = m.read_at(&mut [0u8; 512], 0).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotConnected, "{e}");
    assert!(!m.connected());
}
