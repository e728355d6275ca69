// Prescient's identity as an HDF5 VOL connector.
#ifndef PRESCIENT_VOL_PASSTHROUGH_CONNECTOR_H_
#define PRESCIENT_VOL_PASSTHROUGH_CONNECTOR_H_

namespace prescient::vol {

// In HDF5's range for testing (256-511); a registered value replaces it once
// the HDF Group assigns one.
inline constexpr int kConnectorValue = 308;
inline constexpr const char* kConnectorName = "prescient";
inline constexpr unsigned kConnectorVersion = 1;

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_PASSTHROUGH_CONNECTOR_H_
