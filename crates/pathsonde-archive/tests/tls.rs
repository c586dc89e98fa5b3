//! TLS to a real PostgreSQL (scripts/ci-postgres.sh serves TLS-only TCP on
//! 127.0.0.1 with a self-signed certificate naming only "localhost"): each
//! libpq `sslmode` does what it says, and a connection that should be
//! refused is.

use pathsonde_archive::testing::in_ci;

/// The TLS URL (`postgresql://pathsonde@localhost:PORT/pathsonde_test`) and
/// the server's certificate, or `None` outside CI when there is no server.
fn server() -> Option<(String, String)> {
    let url = std::env::var("PATHSONDE_TEST_POSTGRES_TLS").ok();
    let ca = std::env::var("PATHSONDE_TEST_POSTGRES_CA").ok();
    match (url, ca) {
        (Some(u), Some(c)) => Some((u, c)),
        _ => {
            assert!(
                !in_ci(),
                "CI needs PATHSONDE_TEST_POSTGRES_TLS and PATHSONDE_TEST_POSTGRES_CA (scripts/ci-postgres.sh)"
            );
            eprintln!("skipped: no TLS test server (eval \"$(bash scripts/ci-postgres.sh)\")");
            None
        }
    }
}

/// Whether the connection `url` opens is encrypted, by the server's own word.
fn encrypted(url: &str) -> Result<bool, String> {
    let mut c = pathsonde_archive::connect_postgres(url).map_err(|e| e.to_string())?;
    let row = c
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .map_err(|e| e.to_string())?;
    Ok(row.get::<_, bool>(0))
}

#[test]
fn each_sslmode_does_what_libpq_says() {
    let Some((url, ca)) = server() else {
        return;
    };
    let by_ip = url.replace("@localhost:", "@127.0.0.1:");
    let ca_q = ca.replace('/', "%2F");
    // prefer (libpq's default) and require: encrypted, nothing verified.
    assert_eq!(encrypted(&url), Ok(true));
    assert_eq!(encrypted(&format!("{by_ip}?sslmode=require")), Ok(true));
    // verify-full: the chain and the name; the certificate names localhost.
    let full = format!("{url}?sslmode=verify-full&sslrootcert={ca_q}");
    assert_eq!(encrypted(&full), Ok(true));
    let wrong_name = format!("{by_ip}?sslmode=verify-full&sslrootcert={ca_q}");
    let e = encrypted(&wrong_name).expect_err("127.0.0.1 is not the certificate's name");
    assert!(e.to_lowercase().contains("certificate"), "{e}");
    // verify-ca: the chain only, so the address is fine.
    assert_eq!(
        encrypted(&format!("{by_ip}?sslmode=verify-ca&sslrootcert={ca_q}")),
        Ok(true)
    );
    // A root certificate that did not sign the server's: refused.
    let dir = std::env::temp_dir().join(format!("pathsonde-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let other = dir.join("other.crt");
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
        ])
        .arg("-keyout")
        .arg(dir.join("other.key"))
        .arg("-out")
        .arg(&other)
        .output()
        .expect("openssl");
    assert!(made.status.success(), "{made:?}");
    let stranger = format!(
        "{url}?sslmode=verify-full&sslrootcert={}",
        other.display().to_string().replace('/', "%2F")
    );
    let e = encrypted(&stranger).expect_err("a root that did not sign it");
    assert!(e.to_lowercase().contains("certificate"), "{e}");
    // disable: plain TCP, which this server's pg_hba refuses.
    let e = encrypted(&format!("{url}?sslmode=disable")).expect_err("plain TCP is refused");
    assert!(
        e.contains("no pg_hba.conf entry") || e.contains("pg_hba"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
