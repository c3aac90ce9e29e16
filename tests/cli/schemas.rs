//! The committed JSON Schemas are generated from the Rust types, stay current, and accept every
//! file of the example repository.

use std::path::Path;

#[test]
fn committed_schemas_match_the_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas");
    for (name, schema) in capstan::spec::json_schemas() {
        let committed = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        assert!(
            committed == capstan::commands::schema::render(&schema),
            "schemas/{name} is out of date: run `cargo run -- schema --out schemas` and commit it"
        );
    }
}

#[test]
fn every_example_file_validates_against_its_schema() {
    let repo = capstan_testkit::cli::examples_repo();
    let schemas: std::collections::BTreeMap<_, _> =
        capstan::spec::json_schemas().into_iter().collect();
    let check = |file: &Path, schema: &serde_json::Value| {
        let text = std::fs::read_to_string(file).expect("read example");
        let value: serde_json::Value = serde_saphyr::from_str(&text).expect("example is YAML");
        let validator = jsonschema::validator_for(schema).expect("schema compiles");
        let errors: Vec<String> = validator
            .iter_errors(&value)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{} does not match its schema: {errors:#?}",
            file.display()
        );
    };
    check(&repo.join("capstan.yaml"), &schemas["fleet.schema.json"]);
    let mut checked = 0;
    for entry in std::fs::read_dir(repo.join("clusters")).expect("clusters dir") {
        check(
            &entry.expect("entry").path(),
            &schemas["cluster.schema.json"],
        );
        checked += 1;
    }
    assert!(
        checked >= 2,
        "the example repository holds at least two clusters"
    );
}

#[test]
fn the_schema_refuses_what_validation_refuses_structurally() {
    let schemas: std::collections::BTreeMap<_, _> =
        capstan::spec::json_schemas().into_iter().collect();
    let validator =
        jsonschema::validator_for(&schemas["cluster.schema.json"]).expect("schema compiles");
    let bad = serde_json::json!({"apiVersion": "capstan.dev/v1alpha1", "kind": "Cluster", "metadata": {"name": "x"}, "spce": {}});
    assert!(!validator.is_valid(&bad));
}

#[test]
fn the_schema_states_the_bounds_validation_enforces() {
    let schemas: std::collections::BTreeMap<_, _> =
        capstan::spec::json_schemas().into_iter().collect();
    let validator =
        jsonschema::validator_for(&schemas["cluster.schema.json"]).expect("schema compiles");
    let repo = capstan_testkit::cli::examples_repo();
    let text = std::fs::read_to_string(repo.join("clusters/prod.yaml")).expect("read example");
    let prod: serde_json::Value = serde_saphyr::from_str(&text).expect("example is YAML");
    assert!(validator.is_valid(&prod));
    let mut huge = prod.clone();
    huge["spec"]["workers"][0]["replicas"] = serde_json::json!(4_000_000_000u64);
    assert!(!validator.is_valid(&huge), "replicas over 5,000");
    let mut cores = prod;
    cores["spec"]["workers"][0]["machine"]["cores"] = serde_json::json!(129);
    assert!(!validator.is_valid(&cores), "cores over 128");
}
