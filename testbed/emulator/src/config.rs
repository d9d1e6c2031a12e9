//! The linkem configuration file: strict JSON (unknown fields are errors), units in field names.
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    pub client_tun: String,
    pub server_tun: String,
    pub seed: u64,
    #[serde(default)]
    pub stats_file: Option<String>,
    pub up: Direction,
    pub down: Direction,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Direction {
    pub rate: Rate,
    pub delay_ms: f64,
    #[serde(default)]
    pub jitter: Jitter,
    #[serde(default)]
    pub jitter_correlation: f64,
    #[serde(default)]
    pub loss: Loss,
    #[serde(default = "default_queue_bytes")]
    pub queue_bytes: u64,
    #[serde(default)]
    pub schedule: Option<Schedule>,
}

fn default_queue_bytes() -> u64 {
    256 * 1024
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum Rate {
    Unlimited,
    #[serde(rename_all = "camelCase")]
    Constant {
        bytes_per_second: f64,
    },
    Trace {
        file: String,
    },
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum Jitter {
    #[default]
    None,
    #[serde(rename_all = "camelCase")]
    Uniform {
        max_ms: f64,
    },
    #[serde(rename_all = "camelCase")]
    Normal {
        sd_ms: f64,
    },
    Mixture {
        components: Vec<MixtureComponent>,
    },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MixtureComponent {
    pub weight: f64,
    pub mean_ms: f64,
    pub sd_ms: f64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum Loss {
    #[default]
    None,
    Iid {
        p: f64,
    },
    #[serde(rename_all = "camelCase")]
    GilbertElliott {
        p_good_to_bad: f64,
        p_bad_to_good: f64,
        loss_good: f64,
        loss_bad: f64,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Schedule {
    #[serde(default, rename = "loop")]
    pub looping: bool,
    pub segments: Vec<Segment>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Segment {
    pub duration_ms: f64,
    pub connected: bool,
    #[serde(default)]
    pub rate: Option<Rate>,
    #[serde(default)]
    pub delay_ms: Option<f64>,
    #[serde(default)]
    pub jitter: Option<Jitter>,
    #[serde(default)]
    pub loss: Option<Loss>,
}

fn finite_nonneg(v: f64, what: &str) -> Result<(), String> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(format!("{what} must be a finite number >= 0, got {v}"))
    }
}

fn probability(v: f64, what: &str) -> Result<(), String> {
    if (0.0..=1.0).contains(&v) {
        Ok(())
    } else {
        Err(format!("{what} must be in [0, 1], got {v}"))
    }
}

fn check_rate(r: &Rate, at: &str) -> Result<(), String> {
    match r {
        Rate::Unlimited => Ok(()),
        Rate::Constant { bytes_per_second } => {
            if bytes_per_second.is_finite() && *bytes_per_second > 0.0 {
                Ok(())
            } else {
                Err(format!("{at}.rate.bytesPerSecond must be > 0"))
            }
        }
        Rate::Trace { file } => {
            if file.starts_with('/') {
                Ok(())
            } else {
                Err(format!(
                    "{at}.rate.file must be an absolute path, got {file:?}"
                ))
            }
        }
    }
}

fn check_jitter(j: &Jitter, at: &str) -> Result<(), String> {
    match j {
        Jitter::None => Ok(()),
        Jitter::Uniform { max_ms } => finite_nonneg(*max_ms, &format!("{at}.jitter.maxMs")),
        Jitter::Normal { sd_ms } => finite_nonneg(*sd_ms, &format!("{at}.jitter.sdMs")),
        Jitter::Mixture { components } => {
            if components.is_empty() {
                return Err(format!("{at}.jitter.components must not be empty"));
            }
            for (i, c) in components.iter().enumerate() {
                finite_nonneg(c.weight, &format!("{at}.jitter.components[{i}].weight"))?;
                finite_nonneg(c.sd_ms, &format!("{at}.jitter.components[{i}].sdMs"))?;
                if !c.mean_ms.is_finite() {
                    return Err(format!("{at}.jitter.components[{i}].meanMs must be finite"));
                }
            }
            if components.iter().map(|c| c.weight).sum::<f64>() <= 0.0 {
                return Err(format!("{at}.jitter.components: weights must sum to > 0"));
            }
            Ok(())
        }
    }
}

fn check_loss(l: &Loss, at: &str) -> Result<(), String> {
    match l {
        Loss::None => Ok(()),
        Loss::Iid { p } => probability(*p, &format!("{at}.loss.p")),
        Loss::GilbertElliott {
            p_good_to_bad,
            p_bad_to_good,
            loss_good,
            loss_bad,
        } => {
            probability(*p_good_to_bad, &format!("{at}.loss.pGoodToBad"))?;
            probability(*p_bad_to_good, &format!("{at}.loss.pBadToGood"))?;
            probability(*loss_good, &format!("{at}.loss.lossGood"))?;
            probability(*loss_bad, &format!("{at}.loss.lossBad"))
        }
    }
}

fn check_direction(d: &Direction, at: &str) -> Result<(), String> {
    check_rate(&d.rate, at)?;
    finite_nonneg(d.delay_ms, &format!("{at}.delayMs"))?;
    check_jitter(&d.jitter, at)?;
    if !(d.jitter_correlation >= 0.0 && d.jitter_correlation < 1.0) {
        return Err(format!(
            "{at}.jitterCorrelation must be in [0, 1), got {}",
            d.jitter_correlation
        ));
    }
    check_loss(&d.loss, at)?;
    if d.queue_bytes == 0 {
        return Err(format!("{at}.queueBytes must be > 0"));
    }
    if let Some(s) = &d.schedule {
        if s.segments.is_empty() {
            return Err(format!("{at}.schedule.segments must not be empty"));
        }
        for (i, seg) in s.segments.iter().enumerate() {
            let sat = format!("{at}.schedule.segments[{i}]");
            if !(seg.duration_ms.is_finite() && seg.duration_ms > 0.0) {
                return Err(format!("{sat}.durationMs must be > 0"));
            }
            if let Some(r) = &seg.rate {
                check_rate(r, &sat)?;
            }
            if let Some(v) = seg.delay_ms {
                finite_nonneg(v, &format!("{sat}.delayMs"))?;
            }
            if let Some(j) = &seg.jitter {
                check_jitter(j, &sat)?;
            }
            if let Some(l) = &seg.loss {
                check_loss(l, &sat)?;
            }
        }
    }
    Ok(())
}

fn check_tun_name(name: &str, what: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() < 16
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what} must be a network device name (1-15 of [A-Za-z0-9._-]), got {name:?}"
        ))
    }
}

impl Config {
    pub fn parse(text: &str) -> Result<Config, String> {
        let cfg: Config = serde_json::from_str(text).map_err(|e| format!("invalid config: {e}"))?;
        check_tun_name(&cfg.client_tun, "clientTun")?;
        check_tun_name(&cfg.server_tun, "serverTun")?;
        if cfg.client_tun == cfg.server_tun {
            return Err("clientTun and serverTun must differ".into());
        }
        check_direction(&cfg.up, "up")?;
        check_direction(&cfg.down, "down")?;
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"{"clientTun":"a","serverTun":"b","seed":1,
        "up":{"rate":{"kind":"constant","bytesPerSecond":1000},"delayMs":5,
              "jitter":{"kind":"mixture","components":[{"weight":1,"meanMs":0,"sdMs":1}]},
              "loss":{"kind":"gilbertElliott","pGoodToBad":0.1,"pBadToGood":0.5,"lossGood":0,"lossBad":1},
              "schedule":{"loop":true,"segments":[{"durationMs":10,"connected":true,"delayMs":3},{"durationMs":5,"connected":false}]}},
        "down":{"rate":{"kind":"unlimited"},"delayMs":0,"schedule":null}}"#;

    #[test]
    fn parses_full_config() {
        let c = Config::parse(OK).unwrap();
        assert_eq!(c.down.queue_bytes, 256 * 1024);
        assert!(c.up.schedule.as_ref().unwrap().looping);
    }

    #[test]
    fn rejects_unknown_fields() {
        assert!(Config::parse(&OK.replace("\"delayMs\":5", "\"delayMs\":5,\"bogus\":1")).is_err());
        assert!(Config::parse(
            &OK.replace("\"bytesPerSecond\":1000", "\"bytesPerSecond\":1000,\"x\":2")
        )
        .is_err());
        assert!(Config::parse(&OK.replace("\"kind\":\"unlimited\"", "\"kind\":\"fast\"")).is_err());
    }

    #[test]
    fn rejects_bad_values() {
        assert!(Config::parse(&OK.replace("\"pBadToGood\":0.5", "\"pBadToGood\":1.5")).is_err());
        assert!(Config::parse(&OK.replace("\"delayMs\":0", "\"delayMs\":-1")).is_err());
    }
}
