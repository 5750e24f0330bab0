//! TLS through NBD_OPT_STARTTLS with X.509 certificates: round trips over TCP and Unix
//! sockets, the client's check of the server certificate, certificate-directory errors,
//! client certificates and qemu-io/nbdinfo interop. Certificates are made here with rcgen.
//! Also the TLS test kit that `tls_handshake` (the wire-level cases: FORCEDTLS refusals,
//! hostile TLS clients, the connection bounds over TLS) and `psk` use.

use std::io;
use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

use super::*;
use crate::format::testutil::TempDir;

/// A CA, a server certificate for localhost/127.0.0.1/::1 and a client certificate, laid
/// out as nbdkit (`server/`) and libnbd (`client/`) expect; `other/` holds a second CA's
/// certificate and a client certificate the first CA did not sign.
pub(super) struct Certs {
    dir: TempDir,
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate().unwrap();
    (p.self_signed(&key).unwrap(), key)
}

fn leaf(
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
    ca: &(rcgen::Certificate, KeyPair),
) -> (String, String) {
    let mut p =
        CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    p.distinguished_name.push(DnType::CommonName, names[0]);
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    p.extended_key_usages = vec![usage];
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, &ca.0, &ca.1).unwrap();
    (cert.pem(), key.serialize_pem())
}

impl Certs {
    pub(super) fn new(tag: &str) -> Certs {
        let dir = TempDir::new(&format!("tls-{tag}"));
        let root = dir.path();
        let ca1 = ca("raidlab test CA");
        let (scert, skey) = leaf(
            &["localhost", "127.0.0.1", "::1"],
            ExtendedKeyUsagePurpose::ServerAuth,
            &ca1,
        );
        let (ccert, ckey) = leaf(&["client"], ExtendedKeyUsagePurpose::ClientAuth, &ca1);
        let ca_pem = ca1.0.pem();
        write(&root.join("server/ca-cert.pem"), &ca_pem);
        write(&root.join("server/server-cert.pem"), &scert);
        write(&root.join("server/server-key.pem"), &skey);
        write(&root.join("client/ca-cert.pem"), &ca_pem);
        write(&root.join("client/client-cert.pem"), &ccert);
        write(&root.join("client/client-key.pem"), &ckey);
        write(&root.join("anon/ca-cert.pem"), &ca_pem);
        let ca2 = ca("another CA");
        let (ocert, okey) = leaf(&["client"], ExtendedKeyUsagePurpose::ClientAuth, &ca2);
        write(&root.join("other/ca-cert.pem"), &ca2.0.pem());
        write(&root.join("other/client-cert.pem"), &ocert);
        write(&root.join("other/client-key.pem"), &okey);
        // A client trusting the other CA, but with the first CA's server: a bad server cert.
        write(&root.join("wrongca/ca-cert.pem"), &ca2.0.pem());
        Certs { dir }
    }

    pub(super) fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    pub(super) fn server(&self, mode: TlsMode, verify_peer: bool) -> ServerTls {
        ServerTls::load(mode, Some(&self.path("server")), verify_peer)
            .unwrap()
            .unwrap()
    }

    /// An nbds URI for `addr` ("127.0.0.1:PORT" or "unix:PATH") with the certificates of
    /// `sub` (client/: with a client certificate; anon/: the CA only).
    pub(super) fn uri(&self, addr: &str, sub: &str) -> String {
        let certs = self.path(sub);
        match addr.strip_prefix("unix:") {
            Some(sock) => format!(
                "nbds+unix:///?socket={sock}&tls-certificates={}",
                certs.display()
            ),
            None => format!("nbds://{addr}/?tls-certificates={}", certs.display()),
        }
    }
}

pub(super) fn start_tls(
    listen: &Listen,
    backend: Arc<Mem>,
    limits: Limits,
    tls: ServerTls,
) -> Running {
    let server = Server::bind(listen)
        .unwrap()
        .with_limits(limits)
        .with_tls(Some(tls));
    let addr = server.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&stop);
    let thread = Some(thread::spawn(move || server.run(backend, s)));
    Running { addr, stop, thread }
}

pub(super) fn tcp() -> Listen {
    Listen::Tcp("127.0.0.1:0".parse().unwrap())
}

/// Writes and reads of several sizes (one byte of a record to many records), some
/// pipelined, through `c`; checked against the pattern written.
pub(super) fn exercise(c: &mut Client, seed: u64) {
    let big = pattern(seed, 4 * MIB);
    c.write(0, &big, false).unwrap();
    let mut back = vec![0u8; 4 * MIB];
    c.read(0, &mut back).unwrap();
    assert!(back == big, "4 MiB read back differs");
    let small = pattern(seed + 1, 4096);
    c.write(8 * MIB as u64, &small, true).unwrap();
    c.flush().unwrap();
    let handles: Vec<u64> = (0..16u64)
        .map(|i| c.submit_read(i * 65536, 65536).unwrap())
        .collect();
    let mut seen = HashSet::new();
    for _ in 0..handles.len() {
        let done = c.wait_any().unwrap();
        assert!(done.result.is_ok());
        let i = handles.iter().position(|&h| h == done.handle).unwrap();
        let off = i * 65536;
        assert!(
            done.data == big[off..off + 65536],
            "pipelined read {i} differs"
        );
        seen.insert(done.handle);
    }
    assert_eq!(seen.len(), 16);
    let mut one = vec![0u8; 4096];
    c.read(8 * MIB as u64, &mut one).unwrap();
    assert_eq!(one, small);
}

#[test]
fn tls_round_trip_over_tcp_and_unix() {
    let certs = Certs::new("roundtrip");
    for mode in [TlsMode::On, TlsMode::Require] {
        let mem = Arc::new(Mem::new(16 * MIB));
        let srv = start_tls(
            &tcp(),
            mem.clone(),
            Limits::default(),
            certs.server(mode, false),
        );
        let mut c = Client::connect(&certs.uri(&srv.addr, "anon")).unwrap();
        assert_eq!(c.size_bytes(), 16 * MIB as u64);
        exercise(&mut c, 7);
        c.disconnect().unwrap();
        // `on` also serves plain clients; `require` refuses them before any option.
        let plain = Client::connect(&srv.uri());
        match mode {
            TlsMode::On => {
                let mut p = plain.unwrap();
                let mut b = vec![0u8; 4096];
                p.read(8 * MIB as u64, &mut b).unwrap();
                assert_eq!(b, pattern(8, 4096));
            }
            _ => {
                let msg = plain.err().expect("plain client refused").to_string();
                assert!(msg.contains("0x80000005"), "{msg}");
            }
        }
        let stats = srv.finish();
        assert_eq!(stats.timed_out, 0);
    }
    // Over a Unix socket: the certificate is checked against "localhost".
    let sock = certs.path("nbd.sock");
    let mem = Arc::new(Mem::new(16 * MIB));
    let srv = start_tls(
        &Listen::Unix(sock.clone()),
        mem,
        Limits::default(),
        certs.server(TlsMode::Require, false),
    );
    let mut c = Client::connect(&certs.uri(&srv.addr, "client")).unwrap();
    exercise(&mut c, 11);
    c.disconnect().unwrap();
    srv.finish();
}

#[test]
fn tls_client_checks_the_server_certificate() {
    let certs = Certs::new("servercheck");
    let srv = start_tls(
        &tcp(),
        Arc::new(Mem::new(MIB)),
        Limits::default(),
        certs.server(TlsMode::Require, false),
    );
    // A CA that did not sign the server's certificate.
    let e = Client::connect(&certs.uri(&srv.addr, "wrongca"))
        .err()
        .unwrap();
    assert!(e.to_string().to_lowercase().contains("certificate"), "{e}");
    // A name the certificate does not carry.
    let uri = format!(
        "nbds://{}/?tls-certificates={}&tls-hostname=elsewhere.example",
        srv.addr,
        certs.path("anon").display()
    );
    let e = Client::connect(&uri).err().unwrap();
    assert!(e.to_string().to_lowercase().contains("certificate"), "{e}");
    // No CA at all.
    let e = Client::connect(&format!("nbds://{}/", srv.addr))
        .err()
        .unwrap();
    assert!(e.to_string().contains("tls-certificates"), "{e}");
    // The server is unharmed.
    let mut c = Client::connect(&certs.uri(&srv.addr, "anon")).unwrap();
    c.flush().unwrap();
    drop(c);
    srv.finish();
}

/// Read one option reply over any stream: (option, reply type, data).
pub(super) fn opt_reply(s: &mut impl Read) -> (u32, u32, Vec<u8>) {
    let mut h = [0u8; 20];
    s.read_exact(&mut h).unwrap();
    assert_eq!(
        u64::from_be_bytes(h[..8].try_into().unwrap()),
        OPT_REPLY_MAGIC
    );
    let len = u32::from_be_bytes(h[16..].try_into().unwrap()) as usize;
    let mut d = vec![0u8; len];
    s.read_exact(&mut d).unwrap();
    let be = |r: &[u8]| u32::from_be_bytes(r.try_into().unwrap());
    (be(&h[8..12]), be(&h[12..16]), d)
}

pub(super) fn send_opt(s: &mut impl Write, option: u32, data: &[u8]) {
    let mut m = IHAVEOPT.to_be_bytes().to_vec();
    m.extend_from_slice(&option.to_be_bytes());
    m.extend_from_slice(&(data.len() as u32).to_be_bytes());
    m.extend_from_slice(data);
    s.write_all(&m).unwrap();
}

#[test]
fn bad_certificate_paths_are_typed_config_errors() {
    let certs = Certs::new("badpaths");
    let server = certs.path("server");
    let err = |mode, dir: Option<&Path>, verify| {
        ServerTls::load(mode, dir, verify).expect_err("must be refused")
    };
    // TLS on without a directory; a directory that is not there.
    let e = err(TlsMode::On, None, false);
    assert_eq!(e.option, "--tls-certificates");
    assert!(e.message.contains("server-cert.pem"), "{e}");
    let missing = certs.path("nowhere");
    let e = err(TlsMode::Require, Some(&missing), false);
    assert_eq!(
        (e.option, e.file.as_deref()),
        ("--tls-certificates", Some(&*missing))
    );
    // A missing key, a key that is not PEM, a certificate that is not one.
    let partial = certs.path("partial");
    write(
        &partial.join("server-cert.pem"),
        &std::fs::read_to_string(server.join("server-cert.pem")).unwrap(),
    );
    let e = err(TlsMode::On, Some(&partial), false);
    assert_eq!(e.option, "--tls-certificates");
    assert_eq!(e.file, Some(partial.join("server-key.pem")));
    assert!(e.to_string().contains("server-key.pem"), "{e}");
    write(&partial.join("server-key.pem"), "not a key\n");
    let e = err(TlsMode::On, Some(&partial), false);
    assert_eq!(e.file, Some(partial.join("server-key.pem")));
    assert!(e.message.contains("no private key"), "{e}");
    write(&partial.join("server-cert.pem"), "garbage\n");
    let e = err(TlsMode::On, Some(&partial), false);
    assert_eq!(e.file, Some(partial.join("server-cert.pem")));
    assert!(e.message.contains("CERTIFICATE"), "{e}");
    // A key that is not the certificate's.
    write(
        &partial.join("server-cert.pem"),
        &std::fs::read_to_string(server.join("server-cert.pem")).unwrap(),
    );
    write(
        &partial.join("server-key.pem"),
        &std::fs::read_to_string(certs.path("client/client-key.pem")).unwrap(),
    );
    let e = err(TlsMode::On, Some(&partial), false);
    assert_eq!(e.file, Some(partial.join("server-key.pem")));
    // --tls-verify-peer without ca-cert.pem.
    std::fs::copy(
        server.join("server-key.pem"),
        partial.join("server-key.pem"),
    )
    .unwrap();
    ServerTls::load(TlsMode::On, Some(&partial), false)
        .unwrap()
        .unwrap();
    let e = err(TlsMode::On, Some(&partial), true);
    assert_eq!(
        (e.option, e.file),
        ("--tls-verify-peer", Some(partial.join("ca-cert.pem")))
    );
    // Options that mean nothing with TLS off.
    assert_eq!(
        err(TlsMode::Off, Some(&server), false).option,
        "--tls-certificates"
    );
    assert_eq!(err(TlsMode::Off, None, true).option, "--tls-verify-peer");
    assert!(ServerTls::load(TlsMode::Off, None, false)
        .unwrap()
        .is_none());
    // As `raidlab serve` reports them: a config error naming the option and the file.
    let opts = crate::serve::TlsOptions {
        mode: TlsMode::Require,
        certificates: Some(missing.clone()),
        psk: None,
        verify_peer: false,
    };
    let msg = opts.load().unwrap_err().to_string();
    assert!(
        msg.contains("--tls-certificates") && msg.contains(&*missing.to_string_lossy()),
        "{msg}"
    );
    let e = crate::serve::TlsOptions::parse("maybe", None, None, false).unwrap_err();
    assert!(e.to_string().contains("--tls"), "{e}");
}

#[test]
fn verify_peer_requires_a_client_certificate_from_the_ca() {
    let certs = Certs::new("verifypeer");
    let srv = start_tls(
        &tcp(),
        Arc::new(Mem::new(MIB)),
        Limits::default(),
        certs.server(TlsMode::Require, true),
    );
    let mut c = Client::connect(&certs.uri(&srv.addr, "client")).unwrap();
    c.flush().unwrap();
    c.disconnect().unwrap();
    // No client certificate, or one another CA signed: refused in the TLS handshake (TLS
    // 1.3 clients may only learn it at their first read).
    for sub in ["anon", "other"] {
        let uri = certs.uri(&srv.addr, sub);
        let refused = match Client::connect(&uri) {
            Err(_) => true,
            Ok(mut c) => c.flush().is_err(),
        };
        assert!(refused, "{sub} was served");
    }
    srv.finish();
}

/// Whether the peer closed `s` within `secs` (end of stream or reset; anything read is
/// ignored, such as a TLS alert).
pub(super) fn closed_within(s: &mut TcpStream, secs: u64) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(secs))).unwrap();
    let mut b = [0u8; 4096];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return false
            }
            Err(_) => return true,
        }
    }
}

/// Run `cmd` if it is installed; `None` (after saying so) if not.
pub(super) fn tool(cmd: &str, args: &[&str]) -> Option<std::process::Output> {
    match std::process::Command::new(cmd).args(args).output() {
        Ok(out) => Some(out),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            println!("skipped: {cmd} not installed");
            None
        }
        Err(e) => panic!("{cmd}: {e}"),
    }
}

pub(super) fn text(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn interop_qemu_io_and_nbdinfo_over_tls() {
    let certs = Certs::new("interop");
    let mem = Arc::new(Mem::new(4 * MIB));
    let srv = start_tls(
        &tcp(),
        mem.clone(),
        Limits::default(),
        certs.server(TlsMode::Require, true),
    );
    let port = srv.addr.rsplit(':').next().unwrap().to_string();
    // qemu-io through GnuTLS, with the client certificate --tls-verify-peer asks for.
    let object = format!(
        "tls-creds-x509,id=tls0,endpoint=client,dir={}",
        certs.path("client").display()
    );
    let image = format!(
        "driver=nbd,server.type=inet,server.host=127.0.0.1,server.port={port},tls-creds=tls0"
    );
    let args = [
        "--object",
        &object,
        "--image-opts",
        "-c",
        "write -P 0x5a 0 1M",
        "-c",
        "read -P 0x5a 0 1M",
        &image,
    ];
    if let Some(out) = tool("qemu-io", &args) {
        let t = text(&out);
        assert!(out.status.success(), "qemu-io failed: {t}");
        assert!(!t.contains("failed") && !t.contains("rror"), "{t}");
        assert!(mem.data.read().unwrap()[..MIB].iter().all(|&b| b == 0x5a));
    }
    // nbdinfo through libnbd's nbds:// URI; without a client certificate it is refused.
    if let Some(out) = tool("nbdinfo", &["--size", &certs.uri(&srv.addr, "client")]) {
        assert!(out.status.success(), "nbdinfo failed: {}", text(&out));
        assert_eq!(text(&out).trim(), (4 * MIB).to_string());
        let out = tool("nbdinfo", &["--size", &certs.uri(&srv.addr, "anon")]).unwrap();
        assert!(!out.status.success(), "served without a client certificate");
    }
    srv.finish();
}
