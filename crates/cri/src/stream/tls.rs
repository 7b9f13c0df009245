//! Optional TLS for the streaming server: a certificate chain and its key,
//! both PEM, named by `stream_tls_cert` and `stream_tls_key` in
//! podscope.toml. Without them the server speaks plain HTTP on loopback,
//! as containerd's does by default; with them, every connection is TLS
//! (1.2 or 1.3, ring's suites, no client certificates: the single-use
//! token in the URL is what authorizes a session, as for containerd and
//! CRI-O, whose clients, crictl and kubelet, skip the server's
//! verification).

use podscope_api::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{crypto, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// The two files the config names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Read both files and build the acceptor. Each failure names the setting,
/// the file and what is wrong with it, so podscope-cri refuses to start
/// rather than serve plain text where TLS was asked for.
pub fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor> {
    let cert_pem = read("stream_tls_cert", &files.cert)?;
    let key_pem = read("stream_tls_key", &files.key)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| bad("stream_tls_cert", &files.cert, e))?;
    if certs.is_empty() {
        return Err(bad(
            "stream_tls_cert",
            &files.cert,
            "no CERTIFICATE block in it",
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        bad(
            "stream_tls_key",
            &files.key,
            format!("no usable private key (PKCS#8, PKCS#1 or SEC1 PEM): {e}"),
        )
    })?;
    let provider = Arc::new(crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::internal(format!("streaming server TLS: {e}")))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            bad(
                "stream_tls_key",
                &files.key,
                format!("does not go with {}: {e}", files.cert.display()),
            )
        })?;
    // The upgrade is HTTP/1.1's; a client offering h2 is told so.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn read(setting: &str, path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::io(format!("{setting} {}", path.display()), e))
}

fn bad(setting: &str, path: &Path, why: impl std::fmt::Display) -> Error {
    Error::invalid(setting, format!("{}: {why}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path, cert: &str, key: &str) -> TlsFiles {
        let (c, k) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&c, cert).unwrap();
        std::fs::write(&k, key).unwrap();
        TlsFiles { cert: c, key: k }
    }

    #[test]
    fn missing_and_empty_files_are_named() {
        let dir = podscope_test_support::TempDir::new();
        let e = acceptor(&TlsFiles {
            cert: dir.0.as_path().join("nope.pem"),
            key: dir.0.as_path().join("nope.key"),
        })
        .err()
        .unwrap()
        .to_string();
        assert!(
            e.contains("stream_tls_cert") && e.contains("nope.pem"),
            "{e}"
        );

        let e = acceptor(&files(dir.0.as_path(), "", ""))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("stream_tls_cert") && e.contains("no CERTIFICATE"),
            "{e}"
        );
    }

    #[test]
    fn a_certificate_without_a_key_is_named() {
        let dir = podscope_test_support::TempDir::new();
        // Any base64 body parses as a DER blob; the key is what is missing.
        let cert = "-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n";
        let e = acceptor(&files(dir.0.as_path(), cert, "not a key\n"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("stream_tls_key") && e.contains("no usable private key"),
            "{e}"
        );
    }
}
