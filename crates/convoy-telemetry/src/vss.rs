//! Which signal names a fleet accepts.
//!
//! Names follow COVESA VSS (Vehicle Signal Specification, tree version 4+):
//! the built-in list holds the leaves fleets send most (location, speed,
//! powertrain, OBD, exterior), and `Vehicle.Private.` is the overlay
//! branch VSS reserves for signals it does not define (air quality: NO2,
//! PM2.5, ...). A deployment adds names of its own (`extra`). Anything
//! else is refused by name, so a typo (`Vehicle.Sped`) is reported rather
//! than stored as a new signal.

use std::collections::HashSet;

/// VSS leaves known out of the box.
pub const KNOWN: &[&str] = &[
    "Vehicle.Speed",
    "Vehicle.TraveledDistance",
    "Vehicle.CurrentLocation.Latitude",
    "Vehicle.CurrentLocation.Longitude",
    "Vehicle.CurrentLocation.Altitude",
    "Vehicle.CurrentLocation.Heading",
    "Vehicle.CurrentLocation.HorizontalAccuracy",
    "Vehicle.CurrentLocation.VerticalAccuracy",
    "Vehicle.CurrentLocation.Timestamp",
    "Vehicle.CurrentLocation.GNSSReceiver.FixType",
    "Vehicle.Acceleration.Longitudinal",
    "Vehicle.Acceleration.Lateral",
    "Vehicle.Acceleration.Vertical",
    "Vehicle.AngularVelocity.Yaw",
    "Vehicle.Exterior.AirTemperature",
    "Vehicle.Exterior.Humidity",
    "Vehicle.Exterior.LightIntensity",
    "Vehicle.Cabin.HVAC.AmbientAirTemperature",
    "Vehicle.Powertrain.TractionBattery.StateOfCharge.Current",
    "Vehicle.Powertrain.TractionBattery.CurrentVoltage",
    "Vehicle.Powertrain.TractionBattery.CurrentCurrent",
    "Vehicle.Powertrain.FuelSystem.Level",
    "Vehicle.Powertrain.FuelSystem.Range",
    "Vehicle.Powertrain.CombustionEngine.Speed",
    "Vehicle.Powertrain.CombustionEngine.ECT",
    "Vehicle.Powertrain.Transmission.CurrentGear",
    "Vehicle.Chassis.SteeringWheel.Angle",
    "Vehicle.Chassis.Accelerator.PedalPosition",
    "Vehicle.Chassis.Brake.PedalPosition",
    "Vehicle.OBD.Speed",
    "Vehicle.OBD.EngineSpeed",
    "Vehicle.OBD.EngineLoad",
    "Vehicle.OBD.CoolantTemperature",
    "Vehicle.OBD.ThrottlePosition",
    "Vehicle.OBD.FuelLevel",
    "Vehicle.OBD.MAF",
    "Vehicle.OBD.IntakeTemp",
    "Vehicle.OBD.RunTime",
    "Vehicle.ADAS.ABS.IsEngaged",
    "Vehicle.ADAS.ESC.IsEngaged",
    "Vehicle.Body.Lights.Brake.IsActive",
    "Vehicle.IsMoving",
];

/// The overlay branch for signals VSS does not define.
pub const PRIVATE_PREFIX: &str = "Vehicle.Private.";

/// The set of accepted names.
#[derive(Clone, Debug)]
pub struct SignalCatalog {
    known: HashSet<String>,
}

impl Default for SignalCatalog {
    fn default() -> Self {
        SignalCatalog::new(std::iter::empty::<&str>())
    }
}

impl SignalCatalog {
    /// The built-in names plus `extra`.
    pub fn new<S: AsRef<str>>(extra: impl IntoIterator<Item = S>) -> SignalCatalog {
        let mut known: HashSet<String> = KNOWN.iter().map(|s| s.to_string()).collect();
        known.extend(extra.into_iter().map(|s| s.as_ref().to_owned()));
        SignalCatalog { known }
    }

    /// Whether `path` is accepted, or why not.
    pub fn check(&self, path: &str) -> Result<(), String> {
        if self.known.contains(path) {
            return Ok(());
        }
        if let Some(rest) = path.strip_prefix(PRIVATE_PREFIX) {
            let ok = !rest.is_empty()
                && rest.split('.').all(|p| {
                    !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                });
            if ok {
                return Ok(());
            }
        }
        Err(format!(
            "unknown VSS signal {path:?} (not in the catalog; private signals go under {PRIVATE_PREFIX})"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_private_and_extra_names_pass_typos_do_not() {
        let c = SignalCatalog::new(["Vehicle.Cargo.Temperature"]);
        c.check("Vehicle.Speed").unwrap();
        c.check("Vehicle.Private.AirQuality.NO2").unwrap();
        c.check("Vehicle.Cargo.Temperature").unwrap();
        for bad in [
            "Vehicle.Sped",
            "Speed",
            "Vehicle.Private.",
            "Vehicle.Private.a..b",
            "",
        ] {
            assert!(c.check(bad).is_err(), "{bad}");
        }
    }
}
