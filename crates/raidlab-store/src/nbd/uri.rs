//! NBD URIs as libnbd reads them: `nbd://HOST[:PORT][/EXPORT]`,
//! `nbd+unix:///EXPORT?socket=PATH`, and over TLS `nbds://` and `nbds+unix://` with
//! `tls-certificates=DIR` and `tls-hostname=NAME` (X.509), or `tls-psk-file=FILE` and the
//! user in the authority (`nbds://USER@HOST/`, `nbds+unix://USER@/?socket=...`: TLS-PSK).

use std::io;
use std::path::PathBuf;

/// Where to connect and which export.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    Tcp(String),
    Unix(String),
}

/// TLS asked for by an `nbds://` or `nbds+unix://` URI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UriTls {
    /// `tls-certificates=DIR`.
    pub certificates: Option<PathBuf>,
    /// The name the server's certificate must carry.
    pub hostname: String,
    /// `tls-psk-file=FILE`: connect with the key of `username` from it.
    pub psk_file: Option<PathBuf>,
    /// The user before `@` in the authority (the PSK identity).
    pub username: Option<String>,
}

/// A parsed NBD URI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Uri {
    pub target: Target,
    pub export: String,
    pub tls: Option<UriTls>,
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// Split an NBD URI into its target and export name.
#[cfg(test)]
pub(crate) fn parse_uri(uri: &str) -> io::Result<(Target, String)> {
    let u = parse_uri_full(uri)?;
    Ok((u.target, u.export))
}

/// Parse an NBD URI: scheme (`nbd`, `nbds`, `nbd+unix`, `nbds+unix`), user, target, export
/// and the query parameters this client knows (`socket`, `tls-certificates`,
/// `tls-hostname`, `tls-psk-file`).
pub(crate) fn parse_uri_full(uri: &str) -> io::Result<Uri> {
    let bad = || io::Error::new(io::ErrorKind::InvalidInput, format!("bad NBD URI {uri:?}"));
    let (scheme, rest) = uri.split_once("://").ok_or_else(bad)?;
    let (tls, unix) = match scheme {
        "nbd" => (false, false),
        "nbds" => (true, false),
        "nbd+unix" => (false, true),
        "nbds+unix" => (true, true),
        _ => return Err(bad()),
    };
    let (main, query) = rest.split_once('?').unwrap_or((rest, ""));
    let param = |key: &str| -> io::Result<Option<String>> {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
            .map(percent_decode)
            .transpose()
    };
    let (authority, export) = main.split_once('/').unwrap_or((main, ""));
    let (username, authority) = match authority.rsplit_once('@') {
        Some((user, host)) if !user.is_empty() => (Some(percent_decode(user)?), host),
        Some(_) => return Err(bad()),
        None => (None, authority),
    };
    let (target, host) = if unix {
        if !authority.is_empty() || !main.contains('/') {
            return Err(bad());
        }
        let socket = param("socket")?.filter(|s| !s.is_empty()).ok_or_else(bad)?;
        (Target::Unix(socket), "localhost".to_string())
    } else {
        if authority.is_empty() {
            return Err(bad());
        }
        // A port is present if the text after the last ':' is outside IPv6 brackets.
        let port_at = authority
            .rfind(':')
            .filter(|&i| !authority[i..].contains(']'));
        let (host, addr) = match port_at {
            Some(i) => (&authority[..i], authority.to_string()),
            None => (authority, format!("{authority}:10809")),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        (Target::Tcp(addr), host.to_string())
    };
    let tls = if tls {
        Some(UriTls {
            certificates: param("tls-certificates")?.map(PathBuf::from),
            hostname: param("tls-hostname")?.unwrap_or(host),
            psk_file: param("tls-psk-file")?.map(PathBuf::from),
            username,
        })
    } else {
        None
    };
    Ok(Uri {
        target,
        export: percent_decode(export)?,
        tls,
    })
}

pub(crate) fn percent_decode(s: &str) -> io::Result<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            let byte = hex.ok_or_else(|| invalid(format!("bad %-escape in {s:?}")))?;
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| invalid(format!("{s:?} is not UTF-8")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nbds_uris_parse() {
        let u = parse_uri_full("nbds://[::1]:5/ex?tls-certificates=/d%20x&tls-hostname=h").unwrap();
        assert_eq!(u.target, Target::Tcp("[::1]:5".into()));
        assert_eq!(u.export, "ex");
        assert_eq!(
            u.tls,
            Some(UriTls {
                certificates: Some("/d x".into()),
                hostname: "h".into(),
                psk_file: None,
                username: None,
            })
        );
        let u = parse_uri_full("nbds://server.example").unwrap();
        assert_eq!(u.target, Target::Tcp("server.example:10809".into()));
        assert_eq!(u.tls.unwrap().hostname, "server.example");
        let u = parse_uri_full("nbds+unix:///e?socket=/s&tls-certificates=/c").unwrap();
        assert_eq!(u.target, Target::Unix("/s".into()));
        assert_eq!(u.tls.unwrap().hostname, "localhost");
        let u = parse_uri_full("nbd://h:1/e?tls-certificates=/c").unwrap();
        assert_eq!((u.export.as_str(), u.tls), ("e", None));
        for bad in [
            "nbdx://h",
            "nbds+unix:///e",
            "nbds://",
            "nbds://@h/",
            "nbds+unix://h/?socket=/s",
        ] {
            assert!(parse_uri_full(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn psk_uris_parse() {
        // libnbd's forms: the user in the authority, the key file in the query.
        let u =
            parse_uri_full("nbds://alice@127.0.0.1:10810/disk?tls-psk-file=/k%20s.psk").unwrap();
        assert_eq!(u.target, Target::Tcp("127.0.0.1:10810".into()));
        assert_eq!(u.export, "disk");
        assert_eq!(
            u.tls,
            Some(UriTls {
                certificates: None,
                hostname: "127.0.0.1".into(),
                psk_file: Some("/k s.psk".into()),
                username: Some("alice".into()),
            })
        );
        let u = parse_uri_full("nbds+unix://bob%40x@/e?socket=/s&tls-psk-file=/k").unwrap();
        assert_eq!(u.target, Target::Unix("/s".into()));
        assert_eq!(u.export, "e");
        let t = u.tls.unwrap();
        assert_eq!(t.username.as_deref(), Some("bob@x"));
        assert_eq!(t.psk_file.as_deref(), Some(std::path::Path::new("/k")));
        // A user without TLS is parsed (libnbd ignores it) and changes nothing.
        let u = parse_uri_full("nbd://carol@h/e").unwrap();
        assert_eq!((u.target, u.tls), (Target::Tcp("h:10809".into()), None));
    }
}
