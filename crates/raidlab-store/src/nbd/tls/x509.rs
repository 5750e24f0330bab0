//! X.509 on rustls (ring provider): the server's certificate directory as nbdkit's
//! `--tls-certificates` and a client's trust anchors and optional certificate.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};

use super::TlsConfigError;

/// Largest PEM file read (a certificate chain or a key is a few KiB).
const PEM_MAX: u64 = 1 << 20;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_pem_file(option: &'static str, path: &Path) -> Result<Vec<u8>, TlsConfigError> {
    let fail = |m: String| TlsConfigError::new(option, Some(path), m);
    let f = std::fs::File::open(path).map_err(|e| fail(format!("cannot open: {e}")))?;
    let mut data = Vec::new();
    f.take(PEM_MAX + 1)
        .read_to_end(&mut data)
        .map_err(|e| fail(format!("cannot read: {e}")))?;
    if data.len() as u64 > PEM_MAX {
        return Err(fail(format!("larger than {PEM_MAX} bytes: not a PEM file")));
    }
    Ok(data)
}

/// Every certificate of a PEM file (a chain: the leaf first).
fn load_certs(
    option: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsConfigError> {
    let data = read_pem_file(option, path)?;
    let certs = CertificateDer::pem_slice_iter(&data)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsConfigError::new(option, Some(path), format!("bad PEM: {e}")))?;
    if certs.is_empty() {
        return Err(TlsConfigError::new(
            option,
            Some(path),
            "no CERTIFICATE found (want PEM X.509 certificates)",
        ));
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 RSA or SEC1 EC).
fn load_key(option: &'static str, path: &Path) -> Result<PrivateKeyDer<'static>, TlsConfigError> {
    let data = read_pem_file(option, path)?;
    PrivateKeyDer::from_pem_slice(&data).map_err(|e| {
        let why = match e {
            rustls::pki_types::pem::Error::NoItemsFound => {
                "no private key found (want PEM PKCS#8, RSA or EC PRIVATE KEY)".to_string()
            }
            e => format!("bad PEM: {e}"),
        };
        TlsConfigError::new(option, Some(path), why)
    })
}

/// Trust anchors from a PEM file of CA certificates.
fn load_roots(option: &'static str, path: &Path) -> Result<RootCertStore, TlsConfigError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(option, path)? {
        roots.add(cert).map_err(|e| {
            TlsConfigError::new(option, Some(path), format!("unusable CA certificate: {e}"))
        })?;
    }
    Ok(roots)
}

/// The server's rustls configuration from the certificate directory `dir`:
/// `server-cert.pem` (the chain, leaf first), `server-key.pem` and, with `verify_peer`,
/// `ca-cert.pem` (the CA that signs client certificates).
pub(super) fn server_config(
    dir: &Path,
    verify_peer: bool,
) -> Result<Arc<ServerConfig>, TlsConfigError> {
    const OPT: &str = "--tls-certificates";
    if !dir.is_dir() {
        return Err(TlsConfigError::new(
            OPT,
            Some(dir),
            "not a directory (want one holding server-cert.pem and server-key.pem)",
        ));
    }
    let cert_path = dir.join("server-cert.pem");
    let key_path = dir.join("server-key.pem");
    let certs = load_certs(OPT, &cert_path)?;
    let key = load_key(OPT, &key_path)?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsConfigError::new(OPT, None, format!("TLS setup: {e}")))?;
    let builder = if verify_peer {
        let ca_path = dir.join("ca-cert.pem");
        let roots = load_roots("--tls-verify-peer", &ca_path)?;
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|e| {
                TlsConfigError::new(
                    "--tls-verify-peer",
                    Some(&ca_path),
                    format!("cannot verify clients with it: {e}"),
                )
            })?;
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let config = builder.with_single_cert(certs, key).map_err(|e| {
        TlsConfigError::new(
            OPT,
            Some(&key_path),
            format!("unusable with server-cert.pem: {e}"),
        )
    })?;
    Ok(Arc::new(config))
}

/// A client's TLS configuration: trust the CA certificates of `ca_file`; present
/// `client` (certificate chain file, key file) if the server asks for one.
pub fn client_config(
    ca_file: &Path,
    client: Option<(&Path, &Path)>,
) -> Result<Arc<ClientConfig>, TlsConfigError> {
    let roots = load_roots("tls-ca", ca_file)?;
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsConfigError::new("tls-ca", None, format!("TLS setup: {e}")))?
        .with_root_certificates(roots);
    let config = match client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = load_certs("tls-cert", cert)?;
            let key_der = load_key("tls-key", key)?;
            builder
                .with_client_auth_cert(chain, key_der)
                .map_err(|e| TlsConfigError::new("tls-key", Some(key), e.to_string()))?
        }
    };
    Ok(Arc::new(config))
}
