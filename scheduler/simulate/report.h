// Printing and saving simulation results: a table for people (stdout), CSV
// and JSON for scripts, and the plot through plot_simulation.py.
#ifndef PRESCIENT_SCHEDULER_SIMULATE_REPORT_H_
#define PRESCIENT_SCHEDULER_SIMULATE_REPORT_H_

#include <ostream>
#include <string>

#include "scheduler/simulate/simulator.h"

namespace prescient::scheduler::simulate {

// Summary (one row per policy, with its lower bound and the ratio to it) and
// storage reads per epoch.
void PrintTable(const SimulationResult& result, std::ostream& out);

// One row per (policy, epoch, step) and per (policy, epoch, rank), told apart
// by the `level` column. Throws std::runtime_error if the file cannot be written.
void WriteCsv(const SimulationResult& result, const std::string& path);

// Everything: layout, bounds, per policy totals, epochs, rank-epochs, steps.
void WriteJson(const SimulationResult& result, const std::string& path);

// The shipped plot script (scheduler/simulate/plot_simulation.py); the
// environment variable PRESCIENT_PLOT_SCRIPT overrides it.
std::string PlotScriptPath();

// Runs `python3 PlotScriptPath() json png`; throws std::runtime_error naming
// the command when it fails.
void RunPlotScript(const std::string& json_path, const std::string& png_path);

}  // namespace prescient::scheduler::simulate

#endif  // PRESCIENT_SCHEDULER_SIMULATE_REPORT_H_
