//! TLS through NBD_OPT_STARTTLS at the wire level, over raw connections: FORCEDTLS
//! (`require`) refusals and what STARTTLS forgets, STARTTLS without TLS and the plain
//! options of `on` mode, hostile TLS clients, the connection bounds over TLS and TLS 1.2
//! clients. Apart from `tls.rs` (certificates, round trips through the client, interop),
//! whose certificates and kit these tests use.

use super::tls::{closed_within, opt_reply, send_opt, start_tls, tcp, Certs};
use super::*;
use crate::nbd::server::Stream;
use crate::nbd::tls::TlsStream;
use rustls::pki_types::pem::PemObject;

/// A raw connection that has sent NBD_OPT_STARTTLS, had it acknowledged, and done the TLS
/// handshake (trusting `certs`' CA).
fn raw_tls(addr: &str, certs: &Certs) -> TlsStream {
    let mut raw = Raw::connect(addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    raw.option(OPT_STARTTLS, &[]);
    assert_eq!(raw.reply(), (OPT_STARTTLS, REP_ACK, vec![]));
    let config = crate::nbd::tls::client_config(&certs.path("anon/ca-cert.pem"), None).unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    TlsStream::connect(Stream::Tcp(raw.s), &config, "127.0.0.1", until).unwrap()
}

#[test]
fn require_refuses_plain_options_with_tls_reqd() {
    let certs = Certs::new("require");
    let srv = start_tls(
        &tcp(),
        Arc::new(Mem::new(MIB)),
        Limits::default(),
        certs.server(TlsMode::Require, false),
    );
    let mut raw = Raw::connect(&srv.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    for (opt, data) in [
        (OPT_LIST, vec![]),
        (OPT_INFO, info_data("", &[INFO_BLOCK_SIZE])),
        (OPT_GO, info_data("", &[INFO_BLOCK_SIZE])),
        (OPT_STRUCTURED_REPLY, vec![]),
        (99, vec![1, 2, 3]),
    ] {
        raw.option(opt, &data);
        let (o, rep, msg) = raw.reply();
        assert_eq!((o, rep), (opt, REP_ERR_TLS_REQD), "option {opt}");
        assert!(String::from_utf8_lossy(&msg).contains("STARTTLS"));
    }
    // STARTTLS with data is malformed (and changes nothing); ABORT is still acknowledged.
    raw.option(OPT_STARTTLS, &[0]);
    assert_eq!(raw.reply().1, REP_ERR_INVALID);
    raw.option(OPT_LIST, &[]);
    assert_eq!(raw.reply().1, REP_ERR_TLS_REQD);
    raw.option(OPT_ABORT, &[]);
    assert_eq!(raw.reply(), (OPT_ABORT, REP_ACK, vec![]));
    assert!(raw.closed());
    // NBD_OPT_EXPORT_NAME cannot be refused: the connection ends.
    let mut raw = Raw::connect(&srv.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    raw.option(OPT_EXPORT_NAME, b"");
    assert!(raw.closed());
    // After STARTTLS every option is served, and a second STARTTLS is invalid.
    let mut t = raw_tls(&srv.addr, &certs);
    send_opt(&mut t, OPT_STARTTLS, &[]);
    assert_eq!(opt_reply(&mut t).1, REP_ERR_INVALID);
    send_opt(&mut t, OPT_LIST, &[]);
    assert_eq!(opt_reply(&mut t).1, REP_SERVER);
    assert_eq!(opt_reply(&mut t).1, REP_ACK);
    // What was asked in plain text is forgotten: GO must ask for the block sizes again.
    send_opt(&mut t, OPT_GO, &info_data("", &[]));
    assert_eq!(opt_reply(&mut t).1, REP_ERR_BLOCK_SIZE_REQD);
    send_opt(&mut t, OPT_GO, &info_data("", &[INFO_BLOCK_SIZE]));
    loop {
        let (_, rep, _) = opt_reply(&mut t);
        if rep == REP_ACK {
            break;
        }
        assert_eq!(rep, REP_INFO);
    }
    let req = Request {
        flags: 0,
        kind: CMD_READ,
        cookie: 42,
        offset: 4096,
        len: 4096,
    };
    t.write_all(&req.encode()).unwrap();
    let mut h = [0u8; REPLY_LEN];
    t.read_exact(&mut h).unwrap();
    assert_eq!(parse_simple_reply(&h), Some((Errno(0), 42)));
    let mut data = vec![0u8; 4096];
    t.read_exact(&mut data).unwrap();
    drop(t);
    srv.finish();
}

#[test]
fn starttls_without_tls_is_unsupported_and_on_mode_serves_plain_options() {
    let mem = Arc::new(Mem::new(MIB));
    let srv = Running::start(mem);
    let mut raw = Raw::connect(&srv.addr, FLAG_C_FIXED_NEWSTYLE);
    raw.option(OPT_STARTTLS, &[]);
    assert_eq!(raw.reply().1, REP_ERR_UNSUP);
    raw.option(OPT_LIST, &[]);
    assert_eq!(raw.reply().1, REP_SERVER);
    drop(raw);
    srv.finish();
    let certs = Certs::new("onmode");
    let srv = start_tls(
        &tcp(),
        Arc::new(Mem::new(MIB)),
        Limits::default(),
        certs.server(TlsMode::On, false),
    );
    let mut raw = Raw::connect(&srv.addr, FLAG_C_FIXED_NEWSTYLE);
    raw.option(OPT_LIST, &[]);
    assert_eq!(raw.reply().1, REP_SERVER);
    assert_eq!(raw.reply().1, REP_ACK);
    raw.go("", &[INFO_BLOCK_SIZE]);
    raw.request(0, CMD_FLUSH, 1, 0, 0);
    assert_eq!(raw.simple_reply(), (Errno(0), 1));
    drop(raw);
    // Without NBD_FLAG_C_FIXED_NEWSTYLE there is no TLS (the spec's NOTLS mode).
    let mut raw = Raw::connect(&srv.addr, 0);
    raw.option(OPT_STARTTLS, &[]);
    assert_eq!(raw.reply().1, REP_ERR_UNSUP);
    drop(raw);
    srv.finish();
}

#[test]
fn garbage_client_hello_closes_only_that_connection() {
    let certs = Certs::new("garbage");
    let srv = start_tls(
        &tcp(),
        Arc::new(Mem::new(16 * MIB)),
        Limits::default(),
        certs.server(TlsMode::Require, false),
    );
    // A good client in transmission, before and after.
    let mut good = Client::connect(&certs.uri(&srv.addr, "anon")).unwrap();
    let data = pattern(3, 65536);
    good.write(0, &data, false).unwrap();
    for garbage in [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        // A TLS record header announcing a handshake, then nonsense.
        [&[0x16, 0x03, 0x01, 0x00, 0x40][..], &[0xAB; 64]].concat(),
        // A record far over the size TLS allows.
        vec![0x16, 0x03, 0x03, 0xFF, 0xFF, 1, 2, 3],
    ] {
        let mut raw = Raw::connect(&srv.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
        raw.option(OPT_STARTTLS, &[]);
        assert_eq!(raw.reply().1, REP_ACK);
        raw.s.write_all(&garbage).unwrap();
        assert!(closed_within(&mut raw.s, 5), "garbage kept its connection");
    }
    // A TLS ClientHello sent instead of the NBD client flags: not NBD, closed.
    let mut s = TcpStream::connect(&srv.addr).unwrap();
    let mut g = [0u8; 18];
    s.read_exact(&mut g).unwrap();
    s.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc])
        .unwrap();
    assert!(closed_within(&mut s, 5));
    let mut back = vec![0u8; 65536];
    good.read(0, &mut back).unwrap();
    assert!(back == data);
    let mut again = Client::connect(&certs.uri(&srv.addr, "anon")).unwrap();
    again.read(0, &mut back).unwrap();
    assert!(back == data);
    good.disconnect().unwrap();
    again.disconnect().unwrap();
    srv.finish();
}

#[test]
fn bounds_hold_over_tls() {
    let certs = Certs::new("bounds");
    let limits = Limits {
        handshake_timeout: Duration::from_millis(800),
        idle_timeout: Duration::from_millis(800),
        ..Limits::default()
    };
    let srv = start_tls(
        &tcp(),
        Arc::new(Mem::new(MIB)),
        limits,
        certs.server(TlsMode::Require, false),
    );
    // STARTTLS acknowledged, then no ClientHello: the handshake deadline closes it.
    let start = Instant::now();
    let mut raw = Raw::connect(&srv.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    raw.option(OPT_STARTTLS, &[]);
    assert_eq!(raw.reply().1, REP_ACK);
    assert!(closed_within(&mut raw.s, 5));
    assert!(start.elapsed() < Duration::from_secs(4));
    // TLS done, then silence in the option haggling: the same deadline.
    let mut t = raw_tls(&srv.addr, &certs);
    let mut b = [0u8; 1];
    let start = Instant::now();
    assert!(matches!(t.read(&mut b), Ok(0) | Err(_)));
    assert!(start.elapsed() < Duration::from_secs(4));
    // In transmission, half a request header then silence: the idle timeout.
    let mut c = Client::connect(&certs.uri(&srv.addr, "anon")).unwrap();
    c.flush().unwrap();
    let mut t = raw_tls(&srv.addr, &certs);
    send_opt(&mut t, OPT_GO, &info_data("", &[INFO_BLOCK_SIZE]));
    while opt_reply(&mut t).1 != REP_ACK {}
    let head = Request {
        flags: 0,
        kind: CMD_READ,
        cookie: 1,
        offset: 0,
        len: 4096,
    }
    .encode();
    t.write_all(&head[..10]).unwrap();
    let start = Instant::now();
    assert!(matches!(t.read(&mut b), Ok(0) | Err(_)));
    assert!(start.elapsed() < Duration::from_secs(4));
    // The idle client (between requests) is still served.
    c.flush().unwrap();
    drop(c);
    let stats = srv.finish();
    assert!(stats.timed_out >= 3, "{stats:?}");
}

#[test]
fn tls12_clients_are_served() {
    let certs = Certs::new("tls12");
    let srv = start_tls(
        &tcp(),
        Arc::new(Mem::new(MIB)),
        Limits::default(),
        certs.server(TlsMode::Require, false),
    );
    let pem = std::fs::read(certs.path("anon/ca-cert.pem")).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
        roots.add(c.unwrap()).unwrap();
    }
    let config = Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_protocol_versions(&[&rustls::version::TLS12])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth(),
    );
    let mut raw = Raw::connect(&srv.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    raw.option(OPT_STARTTLS, &[]);
    assert_eq!(raw.reply().1, REP_ACK);
    let until = Instant::now() + Duration::from_secs(10);
    let mut t = TlsStream::connect(Stream::Tcp(raw.s), &config, "localhost", until).unwrap();
    send_opt(&mut t, OPT_LIST, &[]);
    assert_eq!(opt_reply(&mut t).1, REP_SERVER);
    assert_eq!(opt_reply(&mut t).1, REP_ACK);
    drop(t);
    srv.finish();
}
