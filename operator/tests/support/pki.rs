//! A throwaway PKI for TLS tests, made with the `openssl` CLI in a temp dir: a CA and the
//! certificates it signs (P-256 keys: quick to make). Also compiled into the operator's unit
//! tests (`#[path]`), so it uses std only.

#![allow(dead_code)] // Each user needs a different part.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

pub struct Pki {
    pub dir: PathBuf,
}

impl Pki {
    /// A fresh CA (`ca.crt`, `ca.key`) in its own directory.
    pub fn new(label: &str) -> Pki {
        static COUNT: AtomicU64 = AtomicU64::new(0);
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("strata-op-pki-{label}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let pki = Pki { dir };
        pki.new_ca("ca");
        pki
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    pub fn read(&self, file: &str) -> Vec<u8> {
        std::fs::read(self.path(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
    }

    /// Another, unrelated CA: `<name>.crt`, `<name>.key`.
    pub fn new_ca(&self, name: &str) {
        let (key, crt, subject) = (format!("{name}.key"), format!("{name}.crt"), format!("/CN=Strata test {name}"));
        self.openssl(&["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", &key]);
        self.openssl(&["req", "-x509", "-new", "-key", &key, "-out", &crt, "-days", "2", "-subj", &subject]);
    }

    /// `<name>.crt` and `<name>.key` signed by `ca.crt`, for `names` (DNS names, or IPs) and
    /// the extended key usages `usages` (OpenSSL's names, e.g. "serverAuth,clientAuth").
    pub fn issue(&self, name: &str, names: &[&str], usages: &str) {
        self.issue_by("ca", name, names, usages);
    }

    /// As [`Pki::issue`], signed by the CA `<ca>.crt`.
    pub fn issue_by(&self, ca: &str, name: &str, names: &[&str], usages: &str) {
        let alt: Vec<String> = names
            .iter()
            .map(|n| if n.parse::<std::net::IpAddr>().is_ok() { format!("IP:{n}") } else { format!("DNS:{n}") })
            .collect();
        let ext = format!("{name}.ext");
        let mut extensions = format!("subjectAltName={}\nbasicConstraints=CA:FALSE\n", alt.join(","));
        if !usages.is_empty() {
            extensions.push_str(&format!("extendedKeyUsage={usages}\n"));
        }
        std::fs::write(self.path(&ext), extensions).unwrap();
        let (key, csr, crt) = (format!("{name}.key"), format!("{name}.csr"), format!("{name}.crt"));
        self.openssl(&["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", &key]);
        self.openssl(&["req", "-new", "-key", &key, "-out", &csr, "-subj", &format!("/CN={name}")]);
        let (ca_crt, ca_key) = (format!("{ca}.crt"), format!("{ca}.key"));
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_crt,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-out",
            &crt,
            "-days",
            "1",
            "-extfile",
            &ext,
        ]);
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("openssl (Debian package openssl) makes the test certificates: {e}"));
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
