//! TLS-PSK (the `tls-psk` feature, OpenSSL): round trips with raidlab's own client over TCP
//! and Unix sockets in TLS 1.3 and 1.2, wrong keys, unknown users, clients of the other
//! kind (X.509 against PSK and back) refused, the handshake deadline and hostile
//! handshakes, and libnbd's nbdinfo and nbdcopy (GnuTLS) when installed.

use std::io;
use std::path::{Path, PathBuf};

use super::tls::{closed_within, exercise, opt_reply, send_opt, start_tls, tcp, text, tool};
use super::*;
use crate::format::testutil::TempDir;
use crate::nbd::server::Stream;
use crate::nbd::tls::ossl::PskClient;
use crate::nbd::tls::{ClientTls, PskKeys, TlsStream};

const ALICE_KEY: &str = "c0ffee00112233445566778899aabbccddeeff00112233445566778899aabbcc";

/// A server key file (alice, bob), and client files: `wrong.psk` (alice with another
/// key) and `carol.psk` (a user the server does not know).
struct Keys {
    dir: TempDir,
}

impl Keys {
    fn new(tag: &str) -> Keys {
        let dir = TempDir::new(&format!("psk-{tag}"));
        let put = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        put(
            "server.psk",
            &format!("alice:{ALICE_KEY}\nbob:0102030405060708090a0b0c0d0e0f10\n"),
        );
        put("wrong.psk", &format!("alice:{}\n", "ab".repeat(32)));
        put("carol.psk", &format!("carol:{ALICE_KEY}\n"));
        Keys { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn server(&self, mode: TlsMode) -> ServerTls {
        ServerTls::load_psk(mode, Some(&self.path("server.psk")))
            .unwrap()
            .unwrap()
    }

    /// libnbd's form: `nbds://USER@HOST:PORT/?tls-psk-file=FILE` (or over a Unix socket).
    fn uri(&self, addr: &str, user: &str, file: &str) -> String {
        let f = self.path(file);
        match addr.strip_prefix("unix:") {
            Some(sock) => format!(
                "nbds+unix://{user}@/?socket={sock}&tls-psk-file={}",
                f.display()
            ),
            None => format!("nbds://{user}@{addr}/?tls-psk-file={}", f.display()),
        }
    }
}

/// NBD_OPT_STARTTLS acknowledged on a fresh connection: the plain socket, for a handshake.
fn started(addr: &str) -> Stream {
    let mut raw = Raw::connect(addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    raw.option(OPT_STARTTLS, &[]);
    assert_eq!(raw.reply().1, REP_ACK);
    Stream::Tcp(raw.s)
}

fn handshake(addr: &str, client: PskClient) -> io::Result<TlsStream> {
    let until = Instant::now() + Duration::from_secs(10);
    TlsStream::connect_with(started(addr), &ClientTls::Psk(Arc::new(client)), until)
}

fn key_of(file: &Path, user: &str) -> crate::nbd::tls::pskfile::PskKey {
    PskKeys::load("test", file)
        .unwrap()
        .get(user)
        .unwrap()
        .clone()
}

#[test]
fn psk_round_trip_over_tcp_and_unix() {
    let keys = Keys::new("roundtrip");
    for mode in [TlsMode::On, TlsMode::Require] {
        let srv = start_tls(
            &tcp(),
            Arc::new(Mem::new(16 * MIB)),
            Limits::default(),
            keys.server(mode),
        );
        for (user, seed) in [("alice", 3), ("bob", 5)] {
            let mut c = Client::connect(&keys.uri(&srv.addr, user, "server.psk")).unwrap();
            assert_eq!(c.size_bytes(), 16 * MIB as u64);
            exercise(&mut c, seed);
            c.disconnect().unwrap();
        }
        let plain = Client::connect(&srv.uri());
        match mode {
            TlsMode::On => drop(plain.unwrap()),
            _ => {
                let msg = plain.err().expect("plain client refused").to_string();
                assert!(msg.contains("0x80000005"), "{msg}");
            }
        }
        assert_eq!(srv.finish().timed_out, 0);
    }
    let sock = keys.path("nbd.sock");
    let srv = start_tls(
        &Listen::Unix(sock),
        Arc::new(Mem::new(16 * MIB)),
        Limits::default(),
        keys.server(TlsMode::Require),
    );
    let mut c = Client::connect(&keys.uri(&srv.addr, "alice", "server.psk")).unwrap();
    exercise(&mut c, 9);
    c.disconnect().unwrap();
    srv.finish();
}

#[test]
fn psk_sessions_are_tls13_and_tls12_clients_get_ecdhe_psk() {
    let keys = Keys::new("versions");
    let srv = start_tls(
        &tcp(),
        Arc::new(Mem::new(MIB)),
        Limits::default(),
        keys.server(TlsMode::Require),
    );
    let key = key_of(&keys.path("server.psk"), "alice");
    let t13 = handshake(&srv.addr, PskClient::new("test", "alice", &key).unwrap()).unwrap();
    assert_eq!(t13.describe(), "TLSv1.3 TLS_AES_128_GCM_SHA256");
    let mut t12 = handshake(&srv.addr, PskClient::tls12("alice", &key).unwrap()).unwrap();
    let got = t12.describe();
    assert!(got.starts_with("TLSv1.2 ECDHE-PSK-"), "{got}");
    // The option haggling goes on inside the session.
    send_opt(&mut t12, OPT_LIST, &[]);
    assert_eq!(opt_reply(&mut t12).1, REP_SERVER);
    assert_eq!(opt_reply(&mut t12).1, REP_ACK);
    drop((t13, t12));
    srv.finish();
}

#[test]
fn wrong_keys_unknown_users_and_other_kinds_are_refused() {
    let keys = Keys::new("refused");
    let mem = Arc::new(Mem::new(MIB));
    mem.fill(0, 4096, 0x42);
    let srv = start_tls(
        &tcp(),
        mem,
        Limits::default(),
        keys.server(TlsMode::Require),
    );
    // alice with another key: TLS 1.3's binder (or 1.2's Finished) does not check out.
    let e = Client::connect(&keys.uri(&srv.addr, "alice", "wrong.psk"))
        .err()
        .expect("a wrong key is refused");
    assert!(e.to_string().contains("TLS"), "{e}");
    let wrong = key_of(&keys.path("wrong.psk"), "alice");
    assert!(handshake(&srv.addr, PskClient::tls12("alice", &wrong).unwrap()).is_err());
    // carol is not in the server's file.
    let e = Client::connect(&keys.uri(&srv.addr, "carol", "carol.psk"))
        .err()
        .expect("an unknown user is refused");
    assert!(e.to_string().contains("TLS"), "{e}");
    // A user the client's file has no key for is the client's own error, before connecting.
    let e = Client::connect(&keys.uri(&srv.addr, "dave", "server.psk"))
        .err()
        .unwrap();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("no key for user \"dave\""), "{e}");
    // No user in the URI.
    let e = Client::connect(&format!(
        "nbds://{}/?tls-psk-file={}",
        srv.addr,
        keys.path("server.psk").display()
    ))
    .err()
    .unwrap();
    assert!(e.to_string().contains("nbds://USER@HOST"), "{e}");
    // An X.509 client (it trusts some CA) gets no certificate from a PSK server.
    let ca_dir = keys.path("anon");
    std::fs::create_dir_all(&ca_dir).unwrap();
    let ca = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    std::fs::write(ca_dir.join("ca-cert.pem"), ca.cert.pem()).unwrap();
    let e = Client::connect(&format!(
        "nbds://{}/?tls-certificates={}",
        srv.addr,
        ca_dir.display()
    ))
    .err()
    .expect("an X.509 client cannot finish a PSK handshake");
    assert!(e.to_string().contains("TLS"), "{e}");
    // The server is unharmed, and serves alice.
    let mut c = Client::connect(&keys.uri(&srv.addr, "alice", "server.psk")).unwrap();
    let mut b = vec![0u8; 4096];
    c.read(0, &mut b).unwrap();
    assert!(b.iter().all(|&x| x == 0x42));
    c.disconnect().unwrap();
    srv.finish();
}

#[test]
fn a_psk_client_never_accepts_a_certificate_instead() {
    // Against an X.509 server the PSK client must fail, not go on unauthenticated.
    let keys = Keys::new("x509server");
    let dir = keys.path("server");
    std::fs::create_dir_all(&dir).unwrap();
    let cert =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    std::fs::write(dir.join("server-cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.join("server-key.pem"), cert.key_pair.serialize_pem()).unwrap();
    let x509 = ServerTls::load(TlsMode::Require, Some(&dir), false)
        .unwrap()
        .unwrap();
    let srv = start_tls(&tcp(), Arc::new(Mem::new(MIB)), Limits::default(), x509);
    let e = Client::connect(&keys.uri(&srv.addr, "alice", "server.psk"))
        .err()
        .expect("a PSK client refuses a certificate handshake");
    assert!(e.to_string().contains("TLS"), "{e}");
    srv.finish();
}

#[test]
fn psk_handshake_deadline_and_garbage() {
    let keys = Keys::new("bounds");
    let limits = Limits {
        handshake_timeout: Duration::from_millis(800),
        idle_timeout: Duration::from_millis(800),
        ..Limits::default()
    };
    let srv = start_tls(
        &tcp(),
        Arc::new(Mem::new(MIB)),
        limits,
        keys.server(TlsMode::Require),
    );
    // STARTTLS acknowledged, then silence: closed by the handshake deadline.
    let start = Instant::now();
    let Stream::Tcp(mut s) = started(&srv.addr) else {
        unreachable!()
    };
    assert!(closed_within(&mut s, 5));
    assert!(start.elapsed() < Duration::from_secs(4));
    // Half a ClientHello, then silence: the same deadline.
    let Stream::Tcp(mut s) = started(&srv.addr) else {
        unreachable!()
    };
    s.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00])
        .unwrap();
    let start = Instant::now();
    assert!(closed_within(&mut s, 5));
    assert!(start.elapsed() < Duration::from_secs(4));
    // Garbage and an oversized record: that connection only.
    for garbage in [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        [&[0x16, 0x03, 0x01, 0x00, 0x40][..], &[0xAB; 64]].concat(),
        vec![0x16, 0x03, 0x03, 0xFF, 0xFF, 1, 2, 3],
        vec![0x17; 200 << 10],
    ] {
        let Stream::Tcp(mut s) = started(&srv.addr) else {
            unreachable!()
        };
        let _ = s.write_all(&garbage);
        assert!(closed_within(&mut s, 5), "garbage kept its connection");
    }
    let mut c = Client::connect(&keys.uri(&srv.addr, "bob", "server.psk")).unwrap();
    c.flush().unwrap();
    c.disconnect().unwrap();
    let stats = srv.finish();
    assert!(stats.timed_out >= 2, "{stats:?}");
}

#[test]
fn psk_options_are_checked() {
    let keys = Keys::new("options");
    let file = keys.path("server.psk");
    // With TLS off a key file means nothing; with it on, a bad file names its line.
    let e = ServerTls::load_psk(TlsMode::Off, Some(&file)).unwrap_err();
    assert_eq!(e.option, "--tls-psk");
    assert!(e.message.contains("TLS is off"), "{e}");
    assert!(ServerTls::load_psk(TlsMode::Off, None).unwrap().is_none());
    std::fs::write(keys.path("bad.psk"), "alice:00\nbob:xyz\n").unwrap();
    let e = ServerTls::load_psk(TlsMode::On, Some(&keys.path("bad.psk"))).unwrap_err();
    assert_eq!((e.option, e.line), ("--tls-psk", Some(2)));
    let opts =
        |certificates: Option<&str>, psk: Option<&Path>, verify_peer| crate::serve::TlsOptions {
            mode: TlsMode::Require,
            certificates: certificates.map(PathBuf::from),
            psk: psk.map(Path::to_path_buf),
            verify_peer,
        };
    let msg = opts(Some("/nonexistent"), Some(&file), false)
        .load()
        .unwrap_err()
        .to_string();
    assert!(msg.contains("exclude each other"), "{msg}");
    let msg = opts(None, Some(&file), true)
        .load()
        .unwrap_err()
        .to_string();
    assert!(msg.contains("--tls-verify-peer"), "{msg}");
    assert!(opts(None, Some(&file), false).load().unwrap().is_some());
    let msg = opts(None, None, false).load().unwrap_err().to_string();
    assert!(msg.contains("--tls-psk FILE"), "{msg}");
}

#[test]
fn interop_nbdinfo_and_nbdcopy_with_psk() {
    let keys = Keys::new("interop");
    let mem = Arc::new(Mem::new(4 * MIB));
    let srv = start_tls(
        &tcp(),
        Arc::clone(&mem),
        Limits::default(),
        keys.server(TlsMode::Require),
    );
    let uri = keys.uri(&srv.addr, "alice", "server.psk");
    let Some(out) = tool("nbdinfo", &["--size", &uri]) else {
        return;
    };
    assert!(out.status.success(), "nbdinfo failed: {}", text(&out));
    assert_eq!(text(&out).trim(), (4 * MIB).to_string());
    let wrong = tool(
        "nbdinfo",
        &["--size", &keys.uri(&srv.addr, "alice", "wrong.psk")],
    )
    .unwrap();
    assert!(!wrong.status.success(), "served with a wrong key");
    let unknown = tool(
        "nbdinfo",
        &["--size", &keys.uri(&srv.addr, "carol", "carol.psk")],
    )
    .unwrap();
    assert!(!unknown.status.success(), "served an unknown user");
    // nbdcopy a file in and back out.
    let data = crate::ctrl::tests_pattern::pattern(21, 4 * MIB);
    let (src, back) = (keys.path("src.img"), keys.path("back.img"));
    std::fs::write(&src, &data).unwrap();
    if let Some(out) = tool("nbdcopy", &[&src.to_string_lossy(), &uri]) {
        assert!(out.status.success(), "nbdcopy in failed: {}", text(&out));
        assert!(*mem.data.read().unwrap() == data);
        let out = tool("nbdcopy", &[&uri, &back.to_string_lossy()]).unwrap();
        assert!(out.status.success(), "nbdcopy out failed: {}", text(&out));
        assert!(std::fs::read(&back).unwrap() == data);
    }
    srv.finish();
}
