//! Sizes and property strings as Proxmox writes them in a VM's config (`32G`, `size=50G`,
//! `current=8192`).

/// A mebibyte.
pub(super) const MIB: u64 = 1024 * 1024;
/// A gibibyte.
pub(super) const GIB: u64 = 1024 * MIB;

/// The value of a property string's default key (`8192` in `8192` or `current=8192`).
pub(super) fn property_default<'a>(value: &'a str, key: &str) -> Option<&'a str> {
    value
        .split(',')
        .find_map(|part| match part.split_once('=') {
            Some((k, v)) if k == key => Some(v),
            Some(_) => None,
            None => Some(part),
        })
}

/// Parses `32G`, `512M`, `1T`, `10K` or plain bytes.
pub(super) fn parse_size(text: &str) -> Option<u64> {
    let (number, factor) = match text.chars().last()? {
        'K' | 'k' => (&text[..text.len() - 1], 1024.0),
        'M' | 'm' => (&text[..text.len() - 1], MIB as f64),
        'G' | 'g' => (&text[..text.len() - 1], GIB as f64),
        'T' | 't' => (&text[..text.len() - 1], (GIB * 1024) as f64),
        _ => (text, 1.0),
    };
    let value: f64 = number.parse().ok()?;
    (value >= 0.0).then(|| (value * factor).round() as u64)
}

/// Formats a size the way Proxmox writes it in a disk's `size=`.
pub(super) fn format_size(bytes: u64) -> String {
    if bytes.is_multiple_of(GIB * 1024) && bytes > 0 {
        format!("{}T", bytes / (GIB * 1024))
    } else if bytes.is_multiple_of(GIB) {
        format!("{}G", bytes / GIB)
    } else if bytes.is_multiple_of(MIB) {
        format!("{}M", bytes / MIB)
    } else {
        format!("{}K", bytes.div_ceil(1024))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_trip_through_the_proxmox_form() {
        assert_eq!(parse_size("20G"), Some(20 * GIB));
        assert_eq!(format_size(20 * GIB), "20G");
        assert_eq!(format_size(2048 * GIB), "2T");
        assert_eq!(format_size(512 * MIB), "512M");
        assert_eq!(parse_size("+1G"), Some(GIB));
    }

    #[test]
    fn property_strings_yield_their_default_key() {
        assert_eq!(property_default("8192", "current"), Some("8192"));
        assert_eq!(property_default("current=4096", "current"), Some("4096"));
        assert_eq!(
            property_default("1,fstrim_cloned_disks=1", "enabled"),
            Some("1")
        );
        assert_eq!(property_default("enabled=0", "enabled"), Some("0"));
    }
}
