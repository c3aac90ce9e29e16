//! Perl patterns as Proxmox VE checks them (`PVE::JSONSchema::check_prop`: `$value =~
//! m/^$pattern$/`), for the lab's own checks and for judges that read PVE's published schema,
//! whose patterns are Perl's stringified `qr//` (`(?^:...)`, `(?^i:...)`) and may use Perl's
//! `{,n}`.

/// Whether `value` matches the whole of the Perl `pattern`.
///
/// # Errors
/// The pattern, translated, does not compile (a construct Rust's `regex` lacks).
pub fn perl_pattern_matches(pattern: &str, value: &str) -> Result<bool, String> {
    let translated = pattern
        .replace("(?^i:", "(?i:")
        .replace("(?^:", "(?:")
        .replace("{,", "{0,");
    let anchored = format!("^(?:{translated})$");
    let regex = regex::Regex::new(&anchored).map_err(|err| format!("pattern {pattern}: {err}"))?;
    Ok(regex.is_match(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stringified_perl_patterns_match_whole_values() {
        let trunks = r"(?^:\d+(?:-\d+)?(?:;\d+(?:-\d+)?)*)";
        assert_eq!(perl_pattern_matches(trunks, "10;20-30"), Ok(true));
        assert_eq!(perl_pattern_matches(trunks, "10,20"), Ok(false));
        assert_eq!(
            perl_pattern_matches(r"[A-Za-z0-9\-_\s]{,8}", "QEMU"),
            Ok(true)
        );
        assert_eq!(
            perl_pattern_matches(r"[A-Za-z0-9\-_\s]{,8}", "TOO-LONG-VENDOR"),
            Ok(false)
        );
        assert!(perl_pattern_matches("(unclosed", "x").is_err());
    }
}
