//! Certificates for WebTransport with `serverCertificateHashes`: ECDSA P-256, X.509v3, valid for
//! at most 14 days (the browsers' rule), and the SHA-256 of the DER certificate. PEM parsing for
//! operator-provided certificates and keys.

use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, PKCS_ECDSA_P256_SHA256};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use wtransport::tls::rustls::pki_types::{
    CertificateDer, PrivateKeyDer, PrivatePkcs1KeyDer, PrivatePkcs8KeyDer, PrivateSec1KeyDer,
};

/// Longest validity browsers accept for `serverCertificateHashes`.
pub const MAX_VALIDITY_DAYS: u32 = 14;
/// `notBefore` is this far in the past, for peers whose clocks are a little behind.
pub const BACKDATE_SECS: i64 = 60;

#[derive(Debug, Clone)]
pub struct GeneratedCertificate {
    pub certificate_pem: String,
    pub private_key_pem: String,
    pub der: Vec<u8>,
    pub sha256: [u8; 32],
    /// Milliseconds since the epoch.
    pub not_before_ms: i64,
    pub not_after_ms: i64,
}

pub fn sha256(der: &[u8]) -> [u8; 32] {
    Sha256::digest(der).into()
}

/// A self-signed ECDSA P-256 certificate for `names` (DNS names or IP addresses), valid from a
/// minute ago for `validity_days` (1..=14) days in total.
pub fn generate(names: &[String], validity_days: u32) -> Result<GeneratedCertificate, String> {
    if !(1..=MAX_VALIDITY_DAYS).contains(&validity_days) {
        return Err(format!(
            "validityDays must be 1..{MAX_VALIDITY_DAYS} (browsers refuse serverCertificateHashes certificates valid longer than 14 days), got {validity_days}"
        ));
    }
    if names.is_empty() {
        return Err("names must list at least one DNS name or IP address".into());
    }
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(|e| format!("key generation failed: {e}"))?;
    let mut params = CertificateParams::new(names.to_vec()).map_err(|e| format!("invalid names {names:?}: {e}"))?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "mutp webtransport");
    params.distinguished_name = dn;
    // X.509 times have whole seconds: truncate so that the reported times are exact.
    let now =
        OffsetDateTime::from_unix_timestamp(OffsetDateTime::now_utc().unix_timestamp()).map_err(|e| e.to_string())?;
    let not_before = now - time::Duration::seconds(BACKDATE_SECS);
    let not_after = not_before + time::Duration::days(validity_days as i64);
    params.not_before = not_before;
    params.not_after = not_after;
    let cert = params
        .self_signed(&key)
        .map_err(|e| format!("certificate signing failed: {e}"))?;
    let der = cert.der().to_vec();
    Ok(GeneratedCertificate {
        certificate_pem: cert.pem(),
        private_key_pem: key.serialize_pem(),
        sha256: sha256(&der),
        der,
        not_before_ms: not_before.unix_timestamp() * 1000,
        not_after_ms: not_after.unix_timestamp() * 1000,
    })
}

/// Every `CERTIFICATE` block of a PEM text, in order.
pub fn parse_certificates(pem_text: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let blocks = pem::parse_many(pem_text).map_err(|e| format!("invalid certificate PEM: {e}"))?;
    let certs: Vec<_> = blocks
        .into_iter()
        .filter(|b| b.tag() == "CERTIFICATE")
        .map(|b| CertificateDer::from(b.into_contents()))
        .collect();
    if certs.is_empty() {
        return Err("no '-----BEGIN CERTIFICATE-----' block in the certificate PEM".into());
    }
    Ok(certs)
}

/// The private key of a PEM text: PKCS#8 (`PRIVATE KEY`), SEC1 (`EC PRIVATE KEY`) or PKCS#1.
pub fn parse_private_key(pem_text: &str) -> Result<PrivateKeyDer<'static>, String> {
    let blocks = pem::parse_many(pem_text).map_err(|_| "invalid private key PEM".to_string())?;
    for b in blocks {
        let key = match b.tag() {
            "PRIVATE KEY" => PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(b.into_contents())),
            "EC PRIVATE KEY" => PrivateKeyDer::Sec1(PrivateSec1KeyDer::from(b.into_contents())),
            "RSA PRIVATE KEY" => PrivateKeyDer::Pkcs1(PrivatePkcs1KeyDer::from(b.into_contents())),
            _ => continue,
        };
        return Ok(key);
    }
    Err("no private key block (PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY) in the key PEM".into())
}

/// SHA-256 of the first certificate of a PEM text.
pub fn certificate_hash(pem_text: &str) -> Result<[u8; 32], String> {
    Ok(sha256(parse_certificates(pem_text)?[0].as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::prelude::*;

    #[test]
    fn generates_p256_v3_within_14_days() {
        let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let g = generate(&names, 14).unwrap();
        let (_, cert) = X509Certificate::from_der(&g.der).unwrap();
        assert_eq!(cert.version(), X509Version::V3);
        let validity = cert.validity();
        let span = validity.not_after.timestamp() - validity.not_before.timestamp();
        assert!(span <= 14 * 86_400, "validity {span} s exceeds 14 days");
        assert_eq!(validity.not_before.timestamp() * 1000, g.not_before_ms);
        assert_eq!(validity.not_after.timestamp() * 1000, g.not_after_ms);
        let now = OffsetDateTime::now_utc().unix_timestamp();
        assert!(validity.not_before.timestamp() <= now && now < validity.not_after.timestamp());
        // id-ecPublicKey with the prime256v1 curve.
        let spki = cert.public_key();
        assert_eq!(spki.algorithm.algorithm.to_id_string(), "1.2.840.10045.2.1");
        let curve = spki.algorithm.parameters.as_ref().unwrap().as_oid().unwrap();
        assert_eq!(curve.to_id_string(), "1.2.840.10045.3.1.7");
        // Signed with ecdsa-with-SHA256.
        assert_eq!(cert.signature_algorithm.algorithm.to_id_string(), "1.2.840.10045.4.3.2");
        // The SAN holds both names.
        let san = cert.subject_alternative_name().unwrap().unwrap();
        assert_eq!(san.value.general_names.len(), 2);
    }

    #[test]
    fn hash_is_sha256_of_der() {
        let g = generate(&["localhost".to_string()], 1).unwrap();
        let expected: [u8; 32] = Sha256::digest(&g.der).into();
        assert_eq!(g.sha256, expected);
        assert_eq!(certificate_hash(&g.certificate_pem).unwrap(), expected);
        // Two certificates differ.
        let h = generate(&["localhost".to_string()], 1).unwrap();
        assert_ne!(g.sha256, h.sha256);
    }

    #[test]
    fn rejects_long_validity_and_no_names() {
        let e = generate(&["localhost".to_string()], 15).unwrap_err();
        assert!(e.contains("14 days"), "{e}");
        assert!(generate(&["localhost".to_string()], 0).is_err());
        assert!(generate(&[], 5).is_err());
    }

    #[test]
    fn parses_generated_pem() {
        let g = generate(&["localhost".to_string()], 2).unwrap();
        assert_eq!(parse_certificates(&g.certificate_pem).unwrap()[0].as_ref(), &g.der[..]);
        assert!(matches!(
            parse_private_key(&g.private_key_pem).unwrap(),
            PrivateKeyDer::Pkcs8(_)
        ));
        assert!(parse_certificates("garbage").is_err());
        assert!(parse_private_key(&g.certificate_pem).is_err());
    }
}
