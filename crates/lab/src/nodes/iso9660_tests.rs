use super::*;
use capstan_core::talos::iso9660::{IsoFile, write_image};

fn cidata() -> Vec<u8> {
    write_image(
        "cidata",
        &[
            IsoFile {
                name: "user-data",
                contents: b"version: v1alpha1\n",
            },
            IsoFile {
                name: "meta-data",
                contents: b"instance-id: a\n",
            },
            IsoFile {
                name: "network-config",
                contents: &[b'x'; 5000],
            },
        ],
    )
    .expect("capstan writes it")
}

#[test]
fn reads_the_volume_id_and_the_rock_ridge_names_capstan_writes() {
    let image = read_image(&cidata()).expect("reads");
    assert_eq!(image.volume_id, "cidata");
    let mut names: Vec<&str> = image.files.iter().map(|f| f.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["meta-data", "network-config", "user-data"]);
    assert_eq!(image.file("user-data"), Some(&b"version: v1alpha1\n"[..]));
    assert_eq!(image.file("network-config").map(<[u8]>::len), Some(5000));
}

/// The offset of the first file record in the root directory (sector 20 in capstan's layout,
/// found here by walking past `.` and `..`).
fn first_file_record(image: &[u8]) -> usize {
    let root = 20 * SECTOR;
    let dot = usize::from(image[root]);
    let dotdot = usize::from(image[root + dot]);
    root + dot + dotdot
}

#[test]
fn without_rock_ridge_a_name_is_the_identifier_lowercased() {
    let mut image = cidata();
    let record = first_file_record(&image);
    // Blank the record's system use area: no NM entry is left.
    let length = usize::from(image[record]);
    let name_len = usize::from(image[record + 32]);
    let system_start = record + 33 + name_len + usize::from(name_len % 2 == 0);
    image[system_start..record + length].fill(0);
    let read = read_image(&image).expect("reads");
    assert!(
        read.files.iter().any(|f| f.name == "meta_data"),
        "{:?}",
        read.files
    );
}

#[test]
fn malformed_images_are_refused_without_panic() {
    assert_eq!(read_image(&[]), Err(IsoReadError::NoPrimaryDescriptor));
    assert_eq!(
        read_image(&vec![0u8; 40 * SECTOR]),
        Err(IsoReadError::NoPrimaryDescriptor)
    );

    // A file extent past the end of the image.
    let mut image = cidata();
    let record = first_file_record(&image);
    image[record + 2..record + 6].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(read_image(&image), Err(IsoReadError::Record(_))));

    // A file size past the bound.
    let mut image = cidata();
    image[record + 10..record + 14].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(
        read_image(&image),
        Err(IsoReadError::FileTooLarge(u32::MAX))
    );

    // A root directory too short for its records, and one too large to read.
    let mut image = cidata();
    image[16 * SECTOR + 156 + 10..16 * SECTOR + 156 + 14].copy_from_slice(&60u32.to_le_bytes());
    assert!(matches!(read_image(&image), Err(IsoReadError::Record(_))));
    let mut image = cidata();
    image[16 * SECTOR + 156 + 10..16 * SECTOR + 156 + 14]
        .copy_from_slice(&(64 * 1024 * 1024u32).to_le_bytes());
    assert!(matches!(read_image(&image), Err(IsoReadError::Record(_))));

    // A wrong block size; a truncated image.
    let mut image = cidata();
    image[16 * SECTOR + 128..16 * SECTOR + 130].copy_from_slice(&512u16.to_le_bytes());
    assert_eq!(read_image(&image), Err(IsoReadError::BlockSize(512)));
    let image = cidata();
    assert!(read_image(&image[..21 * SECTOR]).is_err());

    // Every single-byte corruption of the descriptor and directory sectors: no panic.
    let image = cidata();
    for at in (16 * SECTOR..22 * SECTOR).step_by(7) {
        for value in [0u8, 0xff, 0x21] {
            let mut bad = image.clone();
            bad[at] = value;
            let _ = read_image(&bad);
        }
    }
}

#[test]
fn an_oversized_image_is_refused_before_reading() {
    let image = vec![0u8; MAX_IMAGE_BYTES + 1];
    assert_eq!(
        read_image(&image),
        Err(IsoReadError::ImageTooLarge(MAX_IMAGE_BYTES + 1))
    );
}
