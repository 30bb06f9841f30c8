//! AWS profiles for the S3 backend: `object_store` reads only environment variables, while most
//! users keep their keys, region and endpoint in `~/.aws/credentials` and `~/.aws/config` under a
//! profile (`AWS_PROFILE`). This reads those two files the way the AWS CLI does, for the settings
//! the environment leaves unset: the environment wins, then the profile, then options set in code
//! (`set_options`) over both.
//!
//! The files are INI: `[name]` sections in the credentials file, `[profile name]` (or
//! `[default]`) in the config file, `key = value` lines, `#`/`;` comments. Indented lines belong
//! to a nested block (`s3 =` followed by indented settings) and are skipped. Parsed here rather
//! than through an INI crate: these few rules are the whole format the AWS tools accept.

use std::path::PathBuf;

use stokehold_core::{Error, Result};

/// What a profile may set, as `(file key, object_store config key, environment variables that
/// take precedence)`.
const KEYS: &[(&str, &str, &[&str])] = &[
    (
        "aws_access_key_id",
        "aws_access_key_id",
        &["AWS_ACCESS_KEY_ID"],
    ),
    (
        "aws_secret_access_key",
        "aws_secret_access_key",
        &["AWS_SECRET_ACCESS_KEY"],
    ),
    (
        "aws_session_token",
        "aws_session_token",
        &["AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID"],
    ),
    (
        "region",
        "aws_region",
        &["AWS_REGION", "AWS_DEFAULT_REGION"],
    ),
    (
        "endpoint_url",
        "aws_endpoint",
        &["AWS_ENDPOINT_URL", "AWS_ENDPOINT"],
    ),
];

/// The profile's settings as `object_store` config pairs, for the process environment.
pub fn settings() -> Result<Vec<(String, String)>> {
    settings_with(&|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
}

/// [`settings`] with `env` as the environment (tests pass their own).
pub fn settings_with(env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<(String, String)>> {
    let named = env("AWS_PROFILE").or_else(|| env("AWS_DEFAULT_PROFILE"));
    let profile = named.clone().unwrap_or_else(|| "default".to_string());
    let home = env("HOME").map(PathBuf::from);
    let file = |var: &str, rel: &str| {
        env(var)
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".aws").join(rel)))
    };
    let creds = file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    let config = file("AWS_CONFIG_FILE", "config");
    let config_section = if profile == "default" {
        "default".to_string()
    } else {
        format!("profile {profile}")
    };
    let mut found = false;
    let mut values: Vec<(String, String)> = Vec::new();
    // The credentials file's values win over the config file's (the AWS CLI's order).
    for (path, section) in [
        (&creds, profile.as_str()),
        (&config, config_section.as_str()),
    ] {
        let Some(path) = path else { continue };
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(path, e)),
        };
        if let Some(pairs) = section_of(&text, section) {
            found = true;
            for (k, v) in pairs {
                if !values.iter().any(|(have, _)| *have == k) {
                    values.push((k, v));
                }
            }
        }
    }
    if named.is_some() && !found {
        return Err(Error::invalid(format!(
            "AWS profile {profile:?} is in neither {} nor {}",
            creds.map_or("(no credentials file)".into(), |p| p.display().to_string()),
            config.map_or("(no config file)".into(), |p| p.display().to_string()),
        )));
    }
    let mut out = Vec::new();
    for (file_key, config_key, env_vars) in KEYS {
        if env_vars.iter().any(|v| env(v).is_some()) {
            continue;
        }
        if let Some((_, v)) = values.iter().find(|(k, _)| k == file_key) {
            out.push((config_key.to_string(), v.clone()));
        }
    }
    Ok(out)
}

/// The `key = value` pairs of section `[name]` of an INI text, or None when it has none.
fn section_of(text: &str, name: &str) -> Option<Vec<(String, String)>> {
    let mut inside = false;
    let mut seen = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with([' ', '\t']) {
            continue; // a nested block's setting
        }
        let line = line.trim();
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(sec) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = sec.split_whitespace().collect::<Vec<_>>().join(" ") == name;
            seen |= inside;
            continue;
        }
        if inside {
            if let Some((k, v)) = line.split_once('=') {
                let v = v.trim();
                if !v.is_empty() {
                    out.push((k.trim().to_ascii_lowercase(), v.to_string()));
                }
            }
        }
    }
    seen.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn run(files: &[(&str, &str)], env: &[(&str, &str)]) -> Result<Vec<(String, String)>> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".aws")).unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(".aws").join(name), text).unwrap();
        }
        let mut vars: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        vars.insert("HOME".into(), dir.path().display().to_string());
        settings_with(&|k| vars.get(k).cloned())
    }

    fn get<'a>(s: &'a [(String, String)], k: &str) -> Option<&'a str> {
        s.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str())
    }

    const CREDS: &str = "[default]\naws_access_key_id = AKDEF\naws_secret_access_key = sdef\n\n\
                         # a comment\n[lab]\naws_access_key_id=AKLAB\naws_secret_access_key=slab\n";
    const CONFIG: &str = "[default]\nregion = us-east-1\n[profile lab]\nregion = eu-west-3\n\
                          endpoint_url = http://127.0.0.1:9000\ns3 =\n  addressing_style = path\n";

    #[test]
    fn the_default_profile_and_a_named_one() {
        let files = [("credentials", CREDS), ("config", CONFIG)];
        let d = run(&files, &[]).unwrap();
        assert_eq!(get(&d, "aws_access_key_id"), Some("AKDEF"));
        assert_eq!(get(&d, "aws_region"), Some("us-east-1"));
        assert_eq!(get(&d, "aws_endpoint"), None);
        let lab = run(&files, &[("AWS_PROFILE", "lab")]).unwrap();
        assert_eq!(get(&lab, "aws_access_key_id"), Some("AKLAB"));
        assert_eq!(get(&lab, "aws_secret_access_key"), Some("slab"));
        assert_eq!(get(&lab, "aws_region"), Some("eu-west-3"));
        assert_eq!(get(&lab, "aws_endpoint"), Some("http://127.0.0.1:9000"));
        assert_eq!(get(&lab, "addressing_style"), None);
    }

    #[test]
    fn the_environment_wins_over_the_profile() {
        let files = [("credentials", CREDS), ("config", CONFIG)];
        let env = [
            ("AWS_PROFILE", "lab"),
            ("AWS_ACCESS_KEY_ID", "AKENV"),
            ("AWS_REGION", "x"),
        ];
        let s = run(&files, &env).unwrap();
        assert_eq!(get(&s, "aws_access_key_id"), None);
        assert_eq!(get(&s, "aws_region"), None);
        assert_eq!(get(&s, "aws_endpoint"), Some("http://127.0.0.1:9000"));
    }

    #[test]
    fn no_files_is_nothing_and_a_missing_named_profile_is_an_error() {
        assert!(run(&[], &[]).unwrap().is_empty());
        let err = run(&[("config", CONFIG)], &[("AWS_PROFILE", "nope")]).unwrap_err();
        assert!(err.to_string().contains("\"nope\""), "{err}");
        assert!(err.to_string().contains(".aws/config"), "{err}");
    }
}
