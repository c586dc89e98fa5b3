//! Unpredictable bytes from the kernel (session ids, nonces).

/// Fills `buf` from getrandom(2), retrying short reads; a kernel that cannot
/// give random bytes is a broken host, so this panics rather than hand out
/// guessable nonces.
pub fn fill(buf: &mut [u8]) {
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        // SAFETY: `rest` is a valid writable buffer of the length passed.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n > 0 {
            done += n as usize;
        } else if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            panic!("getrandom failed: {}", std::io::Error::last_os_error());
        }
    }
}

pub fn u64() -> u64 {
    let mut b = [0u8; 8];
    fill(&mut b);
    u64::from_ne_bytes(b)
}
