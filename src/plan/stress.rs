//! Which ranks run which `[[stress]]` table.

use super::RankStress;
use crate::scenario::placement::Placement;
use crate::scenario::stress::StressSpec;
use crate::scenario::{BadField, Field, RankSet, Scenario};

/// Each `[[stress]]` table's ranks; a rank may be in one table only.
pub(super) fn stress_of(scenario: &Scenario, n: usize) -> Result<Vec<RankStress>, BadField> {
    let mut out: Vec<(usize, RankStress)> = Vec::new();
    for (i, table) in scenario.stress.iter().enumerate() {
        let ranks = table
            .ranks
            .as_ref()
            .unwrap_or(&RankSet::All)
            .resolve(n)
            .map_err(|e| BadField::new(Field::stress(i, "ranks"), e.to_string()))?;
        for rank in ranks {
            if let Some((first, _)) = out.iter().find(|(_, s)| s.rank == rank) {
                return Err(BadField::new(
                    Field::stress(i, "ranks"),
                    format!("rank {rank} already runs the stress of table {first}"),
                ));
            }
            let spec = StressSpec {
                threads: table.threads,
                placement: Placement { cores: table.cores.clone(), numa: table.numa.or_default_for(false) },
                load: table.load,
                memory: table.memory,
            };
            out.push((i, RankStress { rank, spec }));
        }
    }
    Ok(out.into_iter().map(|(_, s)| s).collect())
}
