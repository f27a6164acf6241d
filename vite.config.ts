// Read by Ponder's build (its Vite server), not by vitest (vitest.config.ts): see api/host/ponder-build.ts.
import { importLibrariesNatively, keepTransforms } from "./api/host/ponder-build.ts";

importLibrariesNatively();
keepTransforms();

export default {};
