import { useMemo, useState } from 'react';
import { BrowserRouter, Navigate, NavLink, Route, Routes } from 'react-router-dom';
import { Provider } from 'urql';
import { createGraphQLClient } from './graphql/client';
import { forgetKey, storedKey, storeKey } from './session';
import { SignIn } from './pages/SignIn';
import { Deployments } from './pages/Deployments';
import { DeploymentDetail } from './pages/DeploymentDetail';
import { Catalog } from './pages/Catalog';
import { ApiKeys } from './pages/ApiKeys';
import { Requests } from './pages/Requests';
import { RequestDetail } from './pages/RequestDetail';
import { Batches } from './pages/Batches';
import { Webhooks } from './pages/Webhooks';
import { Usage } from './pages/Usage';
import { SharedModels } from './pages/SharedModels';
import { RequestLog } from './pages/RequestLog';
import { RequestLogEntry } from './pages/RequestLogEntry';
import { Playground } from './pages/Playground';
import { Adapters } from './pages/Adapters';

const NAV = [
  ['/deployments', 'Deployments'],
  ['/catalog', 'Catalog'],
  ['/adapters', 'Adapters'],
  ['/requests', 'Requests'],
  ['/request-log', 'Request log'],
  ['/batches', 'Batches'],
  ['/keys', 'API keys'],
  ['/webhooks', 'Webhooks'],
  ['/usage', 'Usage and billing'],
  ['/shared', 'Shared models'],
  ['/playground', 'Playground'],
] as const;

export function App() {
  const [apiKey, setApiKey] = useState<string | null>(storedKey);
  // Narrow screens: the links fold behind a Menu button (styles.css); following one folds them again.
  const [menuOpen, setMenuOpen] = useState(false);
  const client = useMemo(() => createGraphQLClient(apiKey), [apiKey]);
  const signIn = (key: string) => {
    storeKey(key);
    setApiKey(key);
  };
  const signOut = () => {
    forgetKey();
    setApiKey(null);
  };
  return (
    <Provider value={client}>
      <BrowserRouter basename="/console">
        {apiKey === null ? <SignIn onSignedIn={signIn} /> : (
          <div className="shell">
            <nav aria-label="Main" className={menuOpen ? 'open' : undefined}>
              <div className="nav-top">
                <strong className="brand">Inference</strong>
                <button type="button" className="menu-toggle" aria-expanded={menuOpen} aria-controls="main-links" onClick={() => setMenuOpen(!menuOpen)}>Menu</button>
              </div>
              <div id="main-links" className="nav-links" onClick={(event) => { if ((event.target as HTMLElement).closest('a')) setMenuOpen(false); }}>
                {NAV.map(([to, label]) => <NavLink key={to} to={to}>{label}</NavLink>)}
                <button type="button" className="link" onClick={signOut}>Sign out</button>
              </div>
            </nav>
            <main>
              <Routes>
                <Route path="/" element={<Navigate to="/deployments" replace />} />
                <Route path="/deployments" element={<Deployments />} />
                <Route path="/deployments/:id" element={<DeploymentDetail />} />
                <Route path="/catalog" element={<Catalog />} />
                <Route path="/adapters" element={<Adapters />} />
                <Route path="/keys" element={<ApiKeys />} />
                <Route path="/requests" element={<Requests />} />
                <Route path="/requests/:id" element={<RequestDetail />} />
                <Route path="/request-log" element={<RequestLog />} />
                <Route path="/request-log/:id" element={<RequestLogEntry />} />
                <Route path="/batches" element={<Batches />} />
                <Route path="/webhooks" element={<Webhooks />} />
                <Route path="/usage" element={<Usage />} />
                <Route path="/shared" element={<SharedModels />} />
                <Route path="/playground" element={<Playground />} />
                <Route path="*" element={<p>There is no page here.</p>} />
              </Routes>
            </main>
          </div>
        )}
      </BrowserRouter>
    </Provider>
  );
}
