// Read by Ponder's build (its Vite server), not by vitest (vitest.config.ts): see api/host/ponder-build.ts.
import { importLibrariesNatively } from "./api/host/ponder-build.ts";

importLibrariesNatively();

export default {};
