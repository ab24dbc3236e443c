/**
 * Building DOM nodes without a framework: `h('div', {class: 'x'}, child, …)`. Text is always set as
 * text, never parsed as HTML, so nothing an object carries (a commit message, a log line) can
 * inject markup into the page.
 */

export type Child = Node | string | number | false | null | undefined | Child[];

type Attributes = Record<string, string | number | boolean | undefined | ((event: Event) => void)>;

export function h(tag: string, attributes: Attributes = {}, ...children: Child[]): HTMLElement {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === false) continue;
    if (typeof value === 'function') element.addEventListener(name.replace(/^on/, ''), value);
    else if (value === true) element.setAttribute(name, '');
    else element.setAttribute(name, String(value));
  }
  append(element, children);
  return element;
}

function append(parent: Node, children: Child[]): void {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(parent, child);
    else parent.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
}
