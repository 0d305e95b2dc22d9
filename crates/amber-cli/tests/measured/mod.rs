//! What the OO1 and OO7 CLI tests share: which engines a run measured.

/// The engines a run should have measured, of `built` (this binary's): less
/// those the report (`json`) lists as unavailable here (PostgreSQL not
/// installed), which `AMBER_REQUIRE_POSTGRES=1` forbids.
pub fn engines(json: &serde_json::Value, mut built: Vec<&'static str>) -> Vec<&'static str> {
    let unavailable: Vec<&str> = json["unavailable"]
        .as_array()
        .expect("unavailable")
        .iter()
        .map(|u| u["engine"].as_str().expect("engine"))
        .collect();
    if std::env::var("AMBER_REQUIRE_POSTGRES").as_deref() == Ok("1") {
        assert!(unavailable.is_empty(), "{}", json["unavailable"]);
    }
    built.retain(|e| !unavailable.contains(e));
    built
}
