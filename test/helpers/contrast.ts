/**
 * Text contrast as the reader sees it, measured in the page itself: for every visible element that
 * holds text of its own, the WCAG contrast ratio between its computed colour and the background it
 * actually sits on (its own and its ancestors' background colours, composited). One script, given as a
 * string so that Chromium through playwright-core and Firefox through puppeteer-core run the same
 * code, and so that this file needs no DOM types.
 */

export interface ContrastReport {
  /** How many text-holding elements were measured; 0 means the page had not rendered. */
  checked: number;
  /** The lowest ratios found, lowest first, each with the element and its colours. */
  lowest: { ratio: number; where: string; color: string; background: string }[];
}

export const CONTRAST_SCRIPT = `(() => {
  const parse = (value) => {
    const numbers = (value.match(/[\\d.]+/g) || []).map(Number);
    if (value.startsWith('color(srgb')) return numbers.slice(0, 3).map((n) => n * 255).concat(numbers.length > 3 ? numbers[3] : 1);
    return [numbers[0] || 0, numbers[1] || 0, numbers[2] || 0, numbers.length > 3 ? numbers[3] : 1];
  };
  const over = (top, bottom) => {
    const a = top[3];
    return [0, 1, 2].map((i) => top[i] * a + bottom[i] * (1 - a)).concat(1);
  };
  const luminance = (rgb) => {
    const channel = (c) => { const s = c / 255; return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * channel(rgb[0]) + 0.7152 * channel(rgb[1]) + 0.0722 * channel(rgb[2]);
  };
  const backgroundOf = (element) => {
    const layers = [];
    for (let node = element; node; node = node.parentElement) layers.push(parse(getComputedStyle(node).backgroundColor));
    // The canvas under everything: the root's colour, else white.
    let colour = [255, 255, 255, 1];
    for (const layer of layers.reverse()) colour = over(layer, colour);
    return colour;
  };
  const visible = (element) => {
    const style = getComputedStyle(element);
    return style.visibility !== 'hidden' && style.display !== 'none' && element.getClientRects().length > 0;
  };
  const describe = (element) =>
    element.tagName.toLowerCase() +
    (element.id ? '#' + element.id : '') +
    (element.getAttribute('data-field') ? '[data-field=' + element.getAttribute('data-field') + ']' : '') +
    ' "' + (element.textContent || '').trim().slice(0, 30) + '"';
  const found = [];
  for (const element of document.body.querySelectorAll('*')) {
    const ownText = [...element.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim() !== '');
    if (!ownText || !visible(element)) continue;
    const background = backgroundOf(element);
    const color = over(parse(getComputedStyle(element).color), background);
    const [light, dark] = [luminance(color), luminance(background)].sort((a, b) => b - a);
    found.push({
      ratio: Math.round(((light + 0.05) / (dark + 0.05)) * 100) / 100,
      where: describe(element),
      color: getComputedStyle(element).color,
      background: 'rgb(' + background.slice(0, 3).map(Math.round).join(', ') + ')',
    });
  }
  found.sort((a, b) => a.ratio - b.ratio);
  return { checked: found.length, lowest: found.slice(0, 5) };
})()`;
