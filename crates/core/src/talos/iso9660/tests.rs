//! The writer read back by a reader written here from ECMA-119 and RRIP (xorriso judges the
//! same images from outside: tests/talos/cidata.rs).

use proptest::prelude::*;

use super::*;

fn u32_le(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

fn u32_be(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(bytes[at..at + 4].try_into().expect("four bytes"))
}

/// Each root file's Rock Ridge name (or ISO name) and contents, checking both-endian fields.
fn read_root(image: &[u8]) -> (String, Vec<(String, Vec<u8>)>) {
    assert_eq!(image.len() % SECTOR, 0);
    let pvd = &image[16 * SECTOR..17 * SECTOR];
    assert_eq!(&pvd[0..7], b"\x01CD001\x01");
    assert_eq!(u32_le(pvd, 80), u32_be(pvd, 84));
    assert_eq!(
        u32_le(pvd, 80) as usize * SECTOR,
        image.len(),
        "volume space size"
    );
    assert_eq!(image[17 * SECTOR], 255, "set terminator");
    let volume_id = String::from_utf8_lossy(&pvd[40..72]).trim_end().to_owned();
    let root = &pvd[156..190];
    let root_extent = u32_le(root, 2) as usize;
    let root_size = u32_le(root, 10) as usize;
    let directory = &image[root_extent * SECTOR..root_extent * SECTOR + root_size];
    let mut files = Vec::new();
    let mut at = 0;
    while at < directory.len() && directory[at] != 0 {
        let record = &directory[at..at + directory[at] as usize];
        assert_eq!(record.len() % 2, 0, "records have even lengths");
        assert_eq!(u32_le(record, 2), u32_be(record, 6));
        assert_eq!(u32_le(record, 10), u32_be(record, 14));
        let name_length = record[32] as usize;
        let name = &record[33..33 + name_length];
        let mut system_use = &record[33 + name_length + (1 - name_length % 2)..];
        let mut rock_ridge_name = None;
        while system_use.len() >= 4 {
            let length = system_use[2] as usize;
            if &system_use[0..2] == b"NM" {
                rock_ridge_name =
                    Some(String::from_utf8_lossy(&system_use[5..length]).into_owned());
            }
            system_use = &system_use[length..];
        }
        if record[25] & 2 == 0 {
            let extent = u32_le(record, 2) as usize * SECTOR;
            let size = u32_le(record, 10) as usize;
            let shown =
                rock_ridge_name.unwrap_or_else(|| String::from_utf8_lossy(name).into_owned());
            files.push((shown, image[extent..extent + size].to_vec()));
        }
        at += record.len();
    }
    (volume_id, files)
}

#[test]
fn an_image_holds_its_volume_id_and_files_under_their_rock_ridge_names() {
    let files = [
        IsoFile {
            name: "user-data",
            contents: b"version: v1alpha1\n",
        },
        IsoFile {
            name: "meta-data",
            contents: b"instance-id: vm-101\n",
        },
        IsoFile {
            name: "network-config",
            contents: &[7u8; 5000],
        },
    ];
    let image = write_image("cidata", &files).expect("writes");
    let (volume_id, read) = read_root(&image);
    assert_eq!(volume_id, "cidata");
    let mut expected: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|f| (f.name.to_owned(), f.contents.to_vec()))
        .collect();
    expected.sort();
    assert_eq!(read, expected);
    // 22 sectors of structure, one for each small file, three for 5,000 bytes.
    assert_eq!(image.len(), (22 + 1 + 1 + 3) * SECTOR);
}

#[test]
fn iso_names_are_d_characters_with_a_version() {
    assert_eq!(iso_name("user-data"), b"USER_DATA.;1");
    assert_eq!(iso_name("network-config"), b"NETWORK_CONFIG.;1");
    assert_eq!(iso_name("a.b.yaml"), b"A_B.YAML;1");
}

#[test]
fn the_same_files_make_the_same_bytes() {
    let files = [IsoFile {
        name: "user-data",
        contents: b"x",
    }];
    assert_eq!(write_image("cidata", &files), write_image("cidata", &files));
}

#[test]
fn an_empty_file_takes_no_sector() {
    let image = write_image(
        "cidata",
        &[IsoFile {
            name: "meta-data",
            contents: b"",
        }],
    )
    .expect("writes");
    assert_eq!(image.len(), 22 * SECTOR);
    assert_eq!(read_root(&image).1, [("meta-data".to_owned(), vec![])]);
}

#[test]
fn what_it_cannot_write_is_refused_by_name() {
    let big = vec![0u8; MAX_FILE_BYTES + 1];
    let cases: Vec<(&str, Vec<IsoFile<'_>>, IsoProblem)> = vec![
        ("ci data", vec![], IsoProblem::VolumeId("ci data".into())),
        ("", vec![], IsoProblem::VolumeId(String::new())),
        (
            "cidata",
            vec![IsoFile {
                name: "User-Data",
                contents: b"",
            }],
            IsoProblem::FileName("User-Data".into()),
        ),
        (
            "cidata",
            vec![IsoFile {
                name: "../x",
                contents: b"",
            }],
            IsoProblem::FileName("../x".into()),
        ),
        (
            "cidata",
            vec![
                IsoFile {
                    name: "user-data",
                    contents: b"",
                },
                IsoFile {
                    name: "user_data",
                    contents: b"",
                },
            ],
            IsoProblem::DuplicateName("user_data".into()),
        ),
        (
            "cidata",
            vec![IsoFile {
                name: "user-data",
                contents: &big,
            }],
            IsoProblem::FileTooLarge {
                name: "user-data".into(),
                size: MAX_FILE_BYTES + 1,
            },
        ),
        (
            "cidata",
            vec![
                IsoFile {
                    name: "a",
                    contents: b""
                };
                MAX_FILES + 1
            ],
            IsoProblem::TooManyFiles(MAX_FILES + 1),
        ),
    ];
    for (volume_id, files, expected) in cases {
        assert_eq!(write_image(volume_id, &files), Err(expected));
    }
}

#[test]
fn debug_shows_a_files_size_not_its_contents() {
    let file = IsoFile {
        name: "user-data",
        contents: b"secret-token",
    };
    assert_eq!(format!("{file:?}"), "IsoFile(user-data, 12 bytes)");
}

proptest! {
    #[test]
    fn any_files_within_bounds_read_back_unchanged(
        contents in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..5000), 1..=MAX_FILES),
        names in prop::collection::btree_set("[a-z0-9][a-z0-9_-]{0,29}", MAX_FILES),
    ) {
        // `-` and `_` share an ISO name; keep one spelling of each.
        let mut seen = std::collections::BTreeSet::new();
        let names: Vec<String> = names.into_iter().filter(|n| seen.insert(iso_name(n))).collect();
        let files: Vec<IsoFile<'_>> = names
            .iter()
            .zip(&contents)
            .map(|(name, contents)| IsoFile { name, contents })
            .collect();
        let image = write_image("cidata", &files).expect("within bounds");
        let (volume_id, read) = read_root(&image);
        prop_assert_eq!(volume_id, "cidata");
        let mut expected: Vec<(String, Vec<u8>)> =
            files.iter().map(|f| (f.name.to_owned(), f.contents.to_vec())).collect();
        expected.sort_by_key(|(name, _)| iso_name(name));
        prop_assert_eq!(read, expected);
    }
}
