// pdfmake 0.3 ships no types: the little of its Node API the statement uses.
declare module "pdfmake" {
  type Content = unknown;
  type OutputDocument = { getBuffer(): Promise<Buffer> };
  const pdfmake: {
    setFonts(fonts: Record<string, { normal: string; bold: string; italics: string; bolditalics: string }>): void;
    setUrlAccessPolicy(policy: (url: string) => boolean): void;
    setLocalAccessPolicy(policy: (path: string) => boolean): void;
    createPdf(definition: Record<string, unknown>, options?: Record<string, unknown>): OutputDocument;
  };
  export default pdfmake;
  export type { Content };
}
