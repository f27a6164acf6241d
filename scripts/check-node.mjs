// The project runs on the Node 24 runtime pinned in devDependencies ("node"), which npm puts first
// on PATH for npm scripts. Fail early with the fix instead of a cryptic syntax or engine error.
const major = Number(process.versions.node.split(".")[0]);
if (major < 24) {
  console.error(
    `This project needs Node 24 (found ${process.version}). Run it through npm (npm start, npm test), ` +
      "and if that still picks an old Node, run `npm rebuild node` to reinstall the pinned runtime.",
  );
  process.exit(1);
}
